/**
 * Screenshot preprocessing for the policy server: PNG decode + area downsample to the network input,
 * for observations sent as PNGs (the env worker's EpisodePolicy sends them encoded already, see
 * rollout/act-wire.ts). It costs ≈1–2 ms per 160×160 screenshot — ten times the batched forward pass per
 * sample — so on the main thread it, not onnxruntime, bounds a server's throughput and delays heartbeats.
 * The thread pool moves it off the event loop and onto spare cores; `threads: 0` keeps it inline.
 */
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { encodeScreenshot } from '../policy/observation';

/** Encodes a PNG to the [3,S,S] input of a network whose side is `imageSize` (the served network's). */
export interface Preprocessor {
  encode(png: Uint8Array, imageSize: number): Promise<Float32Array>;
  close(): Promise<void>;
}

export function inlinePreprocessor(): Preprocessor {
  return {
    encode: async (png, imageSize) => encodeScreenshot(png, { imageSize }),
    close: async () => undefined,
  };
}

interface Slot {
  worker: Worker;
  pending: Map<number, { resolve: (v: Float32Array) => void; reject: (e: Error) => void }>;
}

/** A fixed pool of worker threads; each job goes to the thread with the fewest pending jobs. */
export function threadPreprocessor(threads: number): Preprocessor {
  const ext = path.extname(__filename);
  const file = path.join(__dirname, `preprocess-worker${ext}`);
  let nextId = 0;
  let closed = false;
  const spawn = (slot: Slot): void => {
    // tsx's loader hooks do not reach worker threads, so a .ts worker registers tsx itself first.
    const worker =
      ext === '.ts'
        ? new Worker(`require(${JSON.stringify(require.resolve('tsx/cjs'))}); require(${JSON.stringify(file)});`, {
            eval: true,
          })
        : new Worker(file);
    slot.worker = worker;
    worker.on('message', (m: { id: number; obs?: Float32Array; error?: string }) => {
      const p = slot.pending.get(m.id);
      if (!p) return;
      slot.pending.delete(m.id);
      if (slot.pending.size === 0) worker.unref();
      if (m.obs) p.resolve(m.obs);
      else p.reject(new Error(m.error ?? 'preprocessing failed'));
    });
    worker.on('error', () => undefined); // 'exit' follows and handles it
    worker.on('exit', (code) => {
      if (closed) return;
      const err = new Error(`preprocessing thread exited with code ${code}`);
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
      spawn(slot); // a dead thread is replaced, so one bad job cannot shrink the pool for good
    });
    // Idle threads must not keep the process alive; a thread with pending jobs does (ref in encode).
    worker.unref();
  };
  const slots: Slot[] = Array.from({ length: threads }, () => {
    const slot = { pending: new Map() } as Slot;
    spawn(slot);
    return slot;
  });
  return {
    encode(png, imageSize) {
      if (closed) return Promise.reject(new Error('preprocessor is closed'));
      const slot = slots.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
      const id = nextId++;
      // Copy into a fresh buffer we can transfer (the request's Buffer may share a pooled slab).
      const copy = new Uint8Array(png);
      return new Promise<Float32Array>((resolve, reject) => {
        if (slot.pending.size === 0) slot.worker.ref();
        slot.pending.set(id, { resolve, reject });
        slot.worker.postMessage({ id, png: copy, imageSize }, [copy.buffer]);
      });
    },
    async close() {
      closed = true;
      await Promise.all(slots.map((s) => s.worker.terminate()));
    },
  };
}
