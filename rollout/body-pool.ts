/**
 * Reusable buffers for act request bodies. A binary call of 32 encoded observations is 1.6 MB; a fresh
 * buffer per call is garbage the collector then has to chase, on the thread that also runs the
 * forward passes. The server takes a buffer here for each body whose length it knows and gives it back
 * once every observation of the call is answered (the batch packer has copied them by then).
 */
export interface PooledBuffer {
  /** Exactly the requested length (a view of the pooled buffer). */
  bytes: Buffer;
  /** Returns the buffer to the pool; call once, after the last use of `bytes`. */
  release(): void;
}

export class BodyPool {
  private readonly free: Buffer[] = [];

  constructor(
    /** Buffers kept for reuse (about the number of calls in flight at once). */
    private readonly maxPooled = 8,
    /** Bodies larger than this are allocated and dropped as usual. */
    private readonly maxPooledBytes = 8 * 1024 * 1024
  ) {}

  acquire(size: number): PooledBuffer {
    if (size > this.maxPooledBytes) return { bytes: Buffer.allocUnsafe(size), release: () => undefined };
    const i = this.free.findIndex((b) => b.byteLength >= size);
    // New buffers get some headroom so calls of slightly different sizes share them.
    const buf =
      i >= 0
        ? this.free.splice(i, 1)[0]!
        : Buffer.allocUnsafeSlow(Math.min(this.maxPooledBytes, Math.ceil(size * 1.25)));
    let released = false;
    return {
      bytes: buf.subarray(0, size),
      release: () => {
        if (released) return;
        released = true;
        if (this.free.length < this.maxPooled) this.free.push(buf);
      },
    };
  }

  /** Buffers waiting for reuse (for tests). */
  get pooled(): number {
    return this.free.length;
  }
}
