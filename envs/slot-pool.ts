/**
 * A fixed number of env slots. acquire() waits for a free slot (FIFO, abortable); a broken env is
 * closed on release and its slot gets a fresh env, so one crash never shrinks the pool.
 */
import { EnvUnavailableError } from './errors';
import type { EnvPool, GuiEnv, PoolStats } from './types';

type Waiter<E> = { resolve: (e: E) => void; reject: (err: Error) => void; signal: AbortSignal | undefined };

/** `create(id)` makes the env for a slot (again after a replacement). */
export class SlotPool<E extends GuiEnv> implements EnvPool {
  private readonly free: E[] = [];
  private readonly busy = new Set<E>();
  private readonly waiters: Waiter<E>[] = [];
  /**
   * One 'abort' listener per signal, shared by every waiter on it: all episodes of a runEpisodes activity
   * wait on the same cancellation signal, and one listener each would pass Node's limit of 10
   * (MaxListenersExceededWarning) as soon as more than 10 of them queue for a slot.
   */
  private readonly abortListeners = new Map<AbortSignal, () => void>();
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
    if (signal?.aborted) throw new EnvUnavailableError(`${this.kind} pool: acquire aborted`);
    return new Promise<E>((resolve, reject) => {
      this.waiters.push({ resolve, reject, signal });
      if (signal) this.watch(signal);
    });
  }

  /** Removes a waiter from the queue and drops its signal's listener when no other waiter shares it. */
  private dequeue(waiter: Waiter<E>): void {
    const i = this.waiters.indexOf(waiter);
    if (i >= 0) this.waiters.splice(i, 1);
    const signal = waiter.signal;
    if (signal && !this.waiters.some((w) => w.signal === signal)) this.unwatch(signal);
  }

  private watch(signal: AbortSignal): void {
    if (this.abortListeners.has(signal)) return;
    const onAbort = () => {
      this.unwatch(signal);
      for (const w of this.waiters.filter((x) => x.signal === signal)) {
        this.dequeue(w);
        w.reject(new EnvUnavailableError(`${this.kind} pool: acquire aborted`));
      }
    };
    this.abortListeners.set(signal, onAbort);
    signal.addEventListener('abort', onAbort, { once: true });
  }

  private unwatch(signal: AbortSignal): void {
    const onAbort = this.abortListeners.get(signal);
    if (!onAbort) return;
    this.abortListeners.delete(signal);
    signal.removeEventListener('abort', onAbort);
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
    const w = this.waiters[0];
    if (w) {
      this.dequeue(w);
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
    for (const w of [...this.waiters]) {
      this.dequeue(w);
      w.reject(new EnvUnavailableError(`${this.kind} pool closed`));
    }
    await Promise.all([...this.free.splice(0), ...this.busy].map((e) => e.close().catch(() => undefined)));
    this.busy.clear();
  }
}
