/**
 * Dynamic batcher: concurrent callers `submit` one item each; the batcher groups whatever is queued
 * into one backend call of at most `maxBatch` items and resolves every caller with its own output.
 *
 * Flush rule: a batch starts as soon as `maxBatch` items are queued, or when the oldest queued item has
 * waited `maxWaitMs`. Only one batch runs at a time: onnxruntime-node's run() is synchronous on the
 * main thread (temporal-practice.md §4 item 5), so two "concurrent" runs would only serialize anyway,
 * and while one batch runs the next one fills up (that is where most of the batching comes from under
 * load). Between batches the batcher yields to the event loop (setImmediate) so HTTP handlers and
 * Temporal heartbeats get their turn even when the queue never drains.
 *
 * Generic and I/O-free: the backend is injected, so the batching logic is unit-tested with a fake.
 */

export interface BatchBackend<I, O> {
  /** Runs one batch; must return exactly one output per input, in order. */
  run(batch: I[]): Promise<O[]> | O[];
}

export interface BatcherOptions {
  /** Upper bound on one backend call; also bounds how long one synchronous ORT run blocks the loop. */
  maxBatch: number;
  /** How long the oldest request may wait for company before a partial batch is run. */
  maxWaitMs: number;
  /** Queue bound: submissions beyond it are refused at once (back-pressure instead of unbounded memory). */
  maxQueue?: number;
}

export interface BatchEvent {
  size: number;
  ms: number;
  error?: unknown;
}

export class BatcherClosedError extends Error {
  constructor() {
    super('batcher is closed');
    this.name = 'BatcherClosedError';
  }
}

export class BatcherOverloadedError extends Error {
  constructor(limit: number) {
    super(`batcher queue is full (${limit} requests waiting)`);
    this.name = 'BatcherOverloadedError';
  }
}

interface Pending<I, O> {
  item: I;
  enqueuedAt: number;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export class DynamicBatcher<I, O> {
  private queue: Pending<I, O>[] = [];
  private running = 0;
  private timer: NodeJS.Timeout | undefined;
  private kickScheduled = false;
  private closed = false;
  /** Batch-size histogram: sizes[k] = number of batches of size k (observable by tests and /health). */
  readonly sizes = new Map<number, number>();
  batches = 0;
  items = 0;

  constructor(
    private readonly backend: BatchBackend<I, O>,
    readonly options: BatcherOptions,
    private readonly onBatch?: (e: BatchEvent) => void,
    private readonly now: () => number = () => performance.now()
  ) {
    if (!Number.isInteger(options.maxBatch) || options.maxBatch < 1)
      throw new RangeError(`maxBatch must be a positive integer, got ${options.maxBatch}`);
    if (!(options.maxWaitMs >= 0)) throw new RangeError(`maxWaitMs must be ≥ 0, got ${options.maxWaitMs}`);
  }

  /** Requests waiting for a batch (not yet handed to the backend). */
  get queueDepth(): number {
    return this.queue.length;
  }

  /** Requests inside the batch the backend is running now. */
  get inFlight(): number {
    return this.running;
  }

  submit(item: I): Promise<O> {
    if (this.closed) return Promise.reject(new BatcherClosedError());
    const limit = this.options.maxQueue;
    if (limit !== undefined && this.queue.length >= limit) return Promise.reject(new BatcherOverloadedError(limit));
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, enqueuedAt: this.now(), resolve, reject });
      this.schedule();
    });
  }

  /** Refuses new work and rejects everything still queued; a running batch completes normally. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const rest = this.queue;
    this.queue = [];
    for (const p of rest) p.reject(new BatcherClosedError());
  }

  /**
   * Decides when the next batch runs. A full batch is kicked on the next macrotask rather than
   * synchronously: callers that submit in the same tick (an HTTP request carrying many observations)
   * are then grouped even with maxWaitMs = 0.
   */
  private schedule(): void {
    if (this.running > 0 || this.queue.length === 0 || this.closed) return;
    const oldest = this.queue[0]!;
    const waited = this.now() - oldest.enqueuedAt;
    if (this.queue.length >= this.options.maxBatch || waited >= this.options.maxWaitMs) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      if (!this.kickScheduled) {
        this.kickScheduled = true;
        setImmediate(() => {
          this.kickScheduled = false;
          void this.runOne();
        });
      }
      return;
    }
    if (!this.timer) {
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          void this.runOne();
        },
        Math.max(0, this.options.maxWaitMs - waited)
      );
    }
  }

  private async runOne(): Promise<void> {
    if (this.running > 0 || this.queue.length === 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.queue.splice(0, this.options.maxBatch);
    this.running = batch.length;
    const t0 = this.now();
    let error: unknown;
    try {
      const outputs = await this.backend.run(batch.map((p) => p.item));
      if (!Array.isArray(outputs) || outputs.length !== batch.length) {
        throw new Error(
          `batch backend returned ${Array.isArray(outputs) ? outputs.length : typeof outputs} outputs for ${batch.length} inputs`
        );
      }
      batch.forEach((p, i) => p.resolve(outputs[i] as O));
    } catch (err) {
      error = err;
      // One bad batch fails its own requests only; the callers decide whether to retry.
      for (const p of batch) p.reject(err);
    } finally {
      this.running = 0;
      this.batches += 1;
      this.items += batch.length;
      this.sizes.set(batch.length, (this.sizes.get(batch.length) ?? 0) + 1);
      this.onBatch?.({ size: batch.length, ms: this.now() - t0, ...(error !== undefined ? { error } : {}) });
      this.schedule();
    }
  }
}
