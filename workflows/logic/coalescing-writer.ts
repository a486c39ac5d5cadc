/**
 * A write-behind queue with at most one write in flight: items queued while a write runs go out together
 * in the next one (up to `maxBatch` per write). The campaign writes its discard records through it, so a
 * burst of decisions costs a few activities rather than one per loop iteration, and waiting for the queue
 * to empty (continue-as-new, stop) waits for at most the write in flight plus what is queued.
 * No Temporal and no I/O here: the caller's `write` does the work (and handles its own failures).
 */
export class CoalescingWriter<T> {
  private queue: T[] = [];
  private running: Promise<void> | null = null;

  constructor(
    private readonly write: (items: T[]) => Promise<void>,
    private readonly maxBatch: number
  ) {
    if (!Number.isInteger(maxBatch) || maxBatch < 1)
      throw new RangeError(`maxBatch must be a positive integer, got ${maxBatch}`);
  }

  add(items: readonly T[]): void {
    this.queue.push(...items);
  }

  /** Items queued and not yet handed to a write. */
  get queued(): number {
    return this.queue.length;
  }

  /** True while a write is in flight. */
  get writing(): boolean {
    return this.running !== null;
  }

  /**
   * Starts writing if idle and resolves once nothing is queued or in flight, items added meanwhile
   * included. A write that throws rejects this flush; its items are not retried (the caller's write
   * decides what a failure means).
   */
  async flush(): Promise<void> {
    while (this.running !== null || this.queue.length > 0) {
      this.running ??= this.drain().finally(() => {
        this.running = null;
      });
      await this.running;
    }
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) await this.write(this.queue.splice(0, this.maxBatch));
  }
}
