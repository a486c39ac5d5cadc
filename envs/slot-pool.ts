/**
 * A fixed number of env slots. acquire() waits for a free slot (FIFO, abortable); a broken env is
 * closed on release and its slot gets a fresh env, so one crash never shrinks the pool.
 */
import { EnvUnavailableError } from './errors';
import type { EnvPool, GuiEnv, PoolStats } from './types';

/** `create(id)` makes the env for a slot (again after a replacement). */
export class SlotPool<E extends GuiEnv> implements EnvPool {
  private readonly free: E[] = [];
  private readonly busy = new Set<E>();
  private readonly waiters: { resolve: (e: E) => void; reject: (err: Error) => void }[] = [];
  private closed = false;
  private replaced = 0;
  private nextId = 0;

  constructor(
    readonly kind: string,
    readonly slots: number,
    private readonly create: (id: string) => E,
    private readonly isBroken: (e: E) => boolean = () => false
  ) {
    if (!Number.isInteger(slots) || slots < 1) throw new RangeError(`slots must be a positive integer, got ${slots}`);
    for (let i = 0; i < slots; i++) this.free.push(this.make());
  }

  private make(): E {
    return this.create(`${this.kind}-${this.nextId++}`);
  }

  async acquire(signal?: AbortSignal): Promise<E> {
    if (this.closed) throw new EnvUnavailableError(`${this.kind} pool is closed`);
    const env = this.free.shift();
    if (env) {
      this.busy.add(env);
      return env;
    }
    return new Promise<E>((resolve, reject) => {
      const waiter = {
        resolve: (e: E) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(e);
        },
        reject,
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new EnvUnavailableError(`${this.kind} pool: acquire aborted`));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  async release(env: GuiEnv, opts: { broken?: boolean } = {}): Promise<void> {
    const e = env as E;
    if (!this.busy.delete(e)) return; // double release is harmless
    let next = e;
    if (opts.broken || this.isBroken(e)) {
      this.replaced++;
      await e.close().catch(() => undefined);
      next = this.make();
    }
    if (this.closed) {
      await next.close().catch(() => undefined);
      return;
    }
    const w = this.waiters.shift();
    if (w) {
      this.busy.add(next);
      w.resolve(next);
    } else this.free.push(next);
  }

  stats(): PoolStats {
    return {
      kind: this.kind,
      slots: this.slots,
      busy: this.busy.size,
      waiting: this.waiters.length,
      replaced: this.replaced,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.reject(new EnvUnavailableError(`${this.kind} pool closed`));
    await Promise.all([...this.free.splice(0), ...this.busy].map((e) => e.close().catch(() => undefined)));
    this.busy.clear();
  }
}
