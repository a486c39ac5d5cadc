/**
 * Thin wrappers over onnxruntime-node for the generated policy graphs.
 * - Policy server: `createInferenceSession(spec, weights)` bakes weights in (rebuild per checkpoint; ~ms).
 * - Trainer: `createTrainSession(spec)` holds the weights-as-inputs forward graph (recomputing log-probs
 *   with the current weights) and the forward+backward graph (gradients; see graph-train.ts for g/c).
 * onnxruntime-node computes synchronously on the calling thread pool; keep batches modest where the
 * process must also heartbeat.
 */
import * as ort from 'onnxruntime-node';
import { buildForwardGraph, IO } from './graph-forward';
import { buildTrainGraph } from './graph-train';
import { IMAGE_CHANNELS, numActions, paramShapes, prevWidth, type PolicySpec } from './spec';
import { checkWeights, type PolicyWeights } from './weights';

/**
 * A batch of observations, row-major and contiguous: obs [B,3,S,S], text [B,V], mask [B,A], and prev
 * [B,2A] for a spec with previousAction (absent = every row is a first step: zeros).
 */
export interface PolicyBatch {
  batch: number;
  obs: Float32Array;
  text: Float32Array;
  mask: Float32Array;
  prev?: Float32Array;
}

export interface ObservationRow {
  obs: Float32Array;
  text: Float32Array;
  mask: Float32Array;
  /** encodePreviousAction(...) [2A]; absent = no previous action (first step). */
  prev?: Float32Array;
}

/** Concatenates per-request rows into one batch (the policy server's dynamic batching). */
export function packBatch(spec: PolicySpec, rows: readonly ObservationRow[]): PolicyBatch {
  const so = IMAGE_CHANNELS * spec.imageSize * spec.imageSize;
  const A = numActions(spec);
  const batch: PolicyBatch = {
    batch: rows.length,
    obs: new Float32Array(rows.length * so),
    text: new Float32Array(rows.length * spec.vocabSize),
    mask: new Float32Array(rows.length * A),
  };
  const P = prevWidth(spec);
  if (spec.previousAction) batch.prev = new Float32Array(rows.length * P);
  rows.forEach((r, i) => {
    batch.obs.set(r.obs, i * so);
    batch.text.set(r.text, i * spec.vocabSize);
    batch.mask.set(r.mask, i * A);
    if (batch.prev && r.prev) {
      if (r.prev.length !== P)
        throw new Error(`policy batch: row ${i} prev has ${r.prev.length} values, expected ${P}`);
      batch.prev.set(r.prev, i * P);
    }
  });
  checkBatch(spec, batch);
  return batch;
}

function checkBatch(spec: PolicySpec, b: PolicyBatch): void {
  const B = b.batch;
  const want: Array<[string, Float32Array, number]> = [
    ['obs', b.obs, B * IMAGE_CHANNELS * spec.imageSize * spec.imageSize],
    ['text', b.text, B * spec.vocabSize],
    ['mask', b.mask, B * numActions(spec)],
  ];
  if (spec.previousAction && b.prev) want.push(['prev', b.prev, B * prevWidth(spec)]);
  if (!Number.isInteger(B) || B < 1) throw new Error(`policy batch size must be a positive integer, got ${B}`);
  for (const [name, arr, n] of want)
    if (arr.length !== n) throw new Error(`policy batch: ${name} has ${arr.length} values, expected ${n} for B=${B}`);
}

function observationFeeds(spec: PolicySpec, b: PolicyBatch): Record<string, ort.Tensor> {
  checkBatch(spec, b);
  const S = spec.imageSize;
  const feeds: Record<string, ort.Tensor> = {
    [IO.obs]: new ort.Tensor('float32', b.obs, [b.batch, IMAGE_CHANNELS, S, S]),
    [IO.text]: new ort.Tensor('float32', b.text, [b.batch, spec.vocabSize]),
    [IO.mask]: new ort.Tensor('float32', b.mask, [b.batch, numActions(spec)]),
  };
  if (spec.previousAction) {
    const P = prevWidth(spec);
    feeds[IO.prev] = new ort.Tensor('float32', b.prev ?? new Float32Array(b.batch * P), [b.batch, P]);
  }
  return feeds;
}

function weightFeeds(spec: PolicySpec, weights: PolicyWeights): Record<string, ort.Tensor> {
  checkWeights(spec, weights);
  return Object.fromEntries(
    paramShapes(spec).map((p) => [p.name, new ort.Tensor('float32', weights[p.name]!, p.shape)])
  );
}

function f32(out: ort.InferenceSession.OnnxValueMapType, name: string): Float32Array {
  const t = out[name];
  if (!t || !(t.data instanceof Float32Array)) throw new Error(`policy session: output ${name} missing or not float32`);
  return t.data;
}

export interface SessionOptions {
  /** Intra-op threads (default 1: rollouts scale by processes, and 1 thread is the fastest at B≈1). */
  threads?: number;
}

const ortOptions = (o: SessionOptions): ort.InferenceSession.SessionOptions => ({
  intraOpNumThreads: o.threads ?? 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  logSeverityLevel: 3, // warnings about unused constants are noise here
});

export interface ForwardResult {
  /** [B,A] log-probabilities, row-major. */
  logp: Float32Array;
  /** [B] categorical entropy (nats). */
  entropy: Float32Array;
}

export interface PolicyInference {
  readonly spec: PolicySpec;
  run(batch: PolicyBatch): Promise<ForwardResult>;
  release(): Promise<void>;
}

export async function createInferenceSession(
  spec: PolicySpec,
  weights: PolicyWeights,
  opts: SessionOptions = {}
): Promise<PolicyInference> {
  checkWeights(spec, weights);
  const session = await ort.InferenceSession.create(buildForwardGraph(spec, weights), ortOptions(opts));
  return {
    spec,
    async run(batch) {
      const out = await session.run(observationFeeds(spec, batch));
      return { logp: f32(out, IO.logp), entropy: f32(out, IO.entropy) };
    },
    release: () => session.release(),
  };
}

/** Per-sample inputs of a gradient pass (see graph-train.ts for the meaning of g and entCoef). */
export interface TrainBatch extends PolicyBatch {
  /** Taken action index per sample [B]. */
  actions: ArrayLike<number>;
  /** ∂loss/∂logp(a_b) per sample [B]. */
  g: Float32Array;
  /** ∂loss/∂H_b per sample [B]. */
  entCoef: Float32Array;
}

export interface GradientResult {
  logpAction: Float32Array;
  entropy: Float32Array;
  /** ∂loss/∂weight for every weight tensor, same names and shapes as the weights. */
  grads: PolicyWeights;
}

export interface PolicyTrainSession {
  readonly spec: PolicySpec;
  /** Forward with the given weights (no gradient): the trainer's log-prob recompute. */
  forward(weights: PolicyWeights, batch: PolicyBatch): Promise<ForwardResult>;
  /** Forward + backward with the given weights. */
  gradients(weights: PolicyWeights, batch: TrainBatch): Promise<GradientResult>;
  release(): Promise<void>;
}

export async function createTrainSession(spec: PolicySpec, opts: SessionOptions = {}): Promise<PolicyTrainSession> {
  const fwd = await ort.InferenceSession.create(buildForwardGraph(spec), ortOptions(opts));
  const train = await ort.InferenceSession.create(buildTrainGraph(spec), ortOptions(opts));
  const A = numActions(spec);
  return {
    spec,
    async forward(weights, batch) {
      const out = await fwd.run({ ...observationFeeds(spec, batch), ...weightFeeds(spec, weights) });
      return { logp: f32(out, IO.logp), entropy: f32(out, IO.entropy) };
    },
    async gradients(weights, batch) {
      const B = batch.batch;
      if (batch.actions.length !== B || batch.g.length !== B || batch.entCoef.length !== B) {
        throw new Error(`train batch: actions/g/entCoef must have B=${B} entries`);
      }
      const onehot = new Float32Array(B * A);
      for (let b = 0; b < B; b++) {
        const a = batch.actions[b]!;
        if (!Number.isInteger(a) || a < 0 || a >= A)
          throw new Error(`train batch: action ${a} out of range at sample ${b}`);
        onehot[b * A + a] = 1;
      }
      const out = await train.run({
        ...observationFeeds(spec, batch),
        ...weightFeeds(spec, weights),
        [IO.onehot]: new ort.Tensor('float32', onehot, [B, A]),
        [IO.g]: new ort.Tensor('float32', batch.g, [B]),
        [IO.entCoef]: new ort.Tensor('float32', batch.entCoef, [B]),
      });
      const grads: PolicyWeights = {};
      for (const p of paramShapes(spec)) grads[p.name] = f32(out, IO.gradPrefix + p.name);
      return { logpAction: f32(out, IO.logpAction), entropy: f32(out, IO.entropy), grads };
    },
    async release() {
      await fwd.release();
      await train.release();
    },
  };
}
