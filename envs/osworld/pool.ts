/**
 * The `osworld` env pool: a fixed number of slots, each an OsworldEnv. A VM lives for one episode, as in
 * DART-GUI (one DesktopEnv per trajectory, closed in `finally`): release() gives the VM back to the env
 * server before the slot is reused, whether the episode ended well, failed or was cancelled.
 */
import { SlotPool } from '../slot-pool';
import type { GuiEnv } from '../types';
import { parseOsworldOptions, type OsworldEnvOptions } from './config';
import { OsworldEnv } from './env';

export class OsworldEnvPool extends SlotPool<OsworldEnv> {
  constructor(opts: OsworldEnvOptions & { slots: number }) {
    const settings = parseOsworldOptions(opts);
    super(
      'osworld',
      opts.slots,
      (id) => new OsworldEnv(id, settings),
      (e) => e.broken
    );
  }

  override async release(env: GuiEnv, opts: { broken?: boolean } = {}): Promise<void> {
    if (env instanceof OsworldEnv) await env.releaseVm();
    await super.release(env, opts);
  }
}
