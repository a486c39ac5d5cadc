/**
 * Reusable input buffers for the policy server's batches. Packing into fresh arrays allocated ≈1.6 MB per
 * batch of 32, and with the request bodies that garbage kept V8's collector busy for a large share of
 * the server's time. The batcher runs one batch at a time and onnxruntime reads its inputs only during
 * run(), so one set of buffers, sized for maxBatch and viewed at the batch's length, serves every batch.
 */
import type { ObservationRow, PolicyBatch } from '../policy/session';
import { IMAGE_CHANNELS, numActions, prevWidth, type PolicySpec } from '../policy/spec';

export class BatchBuffers {
  private readonly obsSize: number;
  private readonly actions: number;
  private readonly obs: Float32Array;
  private readonly text: Float32Array;
  private readonly mask: Float32Array;
  /** [maxBatch, 2A] when the spec has previousAction (policy/observation.ts encodePreviousAction). */
  private readonly prev: Float32Array | undefined;

  constructor(
    private readonly spec: PolicySpec,
    readonly maxBatch: number
  ) {
    this.obsSize = IMAGE_CHANNELS * spec.imageSize * spec.imageSize;
    this.actions = numActions(spec);
    this.obs = new Float32Array(maxBatch * this.obsSize);
    this.text = new Float32Array(maxBatch * spec.vocabSize);
    this.mask = new Float32Array(maxBatch * this.actions);
    this.prev = spec.previousAction ? new Float32Array(maxBatch * prevWidth(spec)) : undefined;
  }

  /**
   * The rows as one batch (same layout as policy/session's packBatch). The result views these buffers:
   * it is valid until the next pack, so the caller must finish its run() first.
   */
  pack(rows: readonly ObservationRow[]): PolicyBatch {
    const B = rows.length;
    if (B < 1 || B > this.maxBatch) throw new RangeError(`batch of ${B} rows; these buffers hold 1…${this.maxBatch}`);
    const V = this.spec.vocabSize;
    rows.forEach((r, i) => {
      if (r.obs.length !== this.obsSize || r.text.length !== V || r.mask.length !== this.actions)
        throw new Error(
          `batch row ${i}: obs/text/mask have ${r.obs.length}/${r.text.length}/${r.mask.length} values, expected ${this.obsSize}/${V}/${this.actions}`
        );
      this.obs.set(r.obs, i * this.obsSize);
      this.text.set(r.text, i * V);
      this.mask.set(r.mask, i * this.actions);
      if (this.prev) {
        const P = 2 * this.actions;
        // A row without prev is a first step: zero it, since the buffer keeps the last batch's values.
        if (r.prev && r.prev.length !== P)
          throw new Error(`batch row ${i}: prev has ${r.prev.length} values, expected ${P}`);
        if (r.prev) this.prev.set(r.prev, i * P);
        else this.prev.fill(0, i * P, (i + 1) * P);
      }
    });
    return {
      batch: B,
      obs: this.obs.subarray(0, B * this.obsSize),
      text: this.text.subarray(0, B * V),
      mask: this.mask.subarray(0, B * this.actions),
      ...(this.prev ? { prev: this.prev.subarray(0, B * 2 * this.actions) } : {}),
    };
  }
}
