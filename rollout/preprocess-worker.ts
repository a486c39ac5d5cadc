/**
 * Worker-thread body of the preprocessing pool: PNG → [3,S,S] float32 with the policy's own encoder.
 * Pure JS (pngjs + area downsampling); no onnxruntime here (ORT sessions in worker threads are known
 * to crash, temporal-practice.md §4 item 5), so threads are safe.
 */
import { parentPort } from 'node:worker_threads';
import { encodeScreenshot } from '../policy/observation';

export interface PreprocessJob {
  id: number;
  png: Uint8Array;
  imageSize: number;
}

export type PreprocessReply = { id: number; obs: Float32Array } | { id: number; error: string };

/** One job; errors (a PNG that does not decode) become a reply, never a dead thread. */
export function runPreprocessJob(job: PreprocessJob): PreprocessReply {
  try {
    return { id: job.id, obs: encodeScreenshot(job.png, { imageSize: job.imageSize }) };
  } catch (err) {
    return { id: job.id, error: err instanceof Error ? err.message : String(err) };
  }
}

parentPort?.on('message', (job: PreprocessJob) => {
  const reply = runPreprocessJob(job);
  parentPort!.postMessage(reply, 'obs' in reply ? [reply.obs.buffer as ArrayBuffer] : []);
});
