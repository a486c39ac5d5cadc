/**
 * Browser env slots in one Chromium per worker: a broken env gets a new context on release, and a
 * dead browser is relaunched by the next env that needs it (BrowserHost).
 */
import { SlotPool } from '../slot-pool';
import { BrowserEnv, type BrowserEnvOptions } from './browser-env';
import { BrowserHost, type BrowserHostOptions } from './host';

export interface BrowserPoolOptions extends BrowserHostOptions, BrowserEnvOptions {
  slots: number;
}

export class BrowserEnvPool extends SlotPool<BrowserEnv> {
  readonly host: BrowserHost;
  constructor(opts: BrowserPoolOptions) {
    const host = new BrowserHost(opts);
    super(
      'browser',
      opts.slots,
      (id) => new BrowserEnv(host, id, opts),
      (e) => e.broken
    );
    this.host = host;
  }

  override async close(): Promise<void> {
    await super.close();
    await this.host.close();
  }
}
