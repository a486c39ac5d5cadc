/**
 * Policy weights: seeded initialisation and safetensors (de)serialisation with validation against the
 * spec. A checkpoint is refused (SafetensorsError) when it is corrupt, has other tensor names/shapes,
 * was written for another spec, or holds a NaN/Infinity — a policy server then keeps its old version.
 */
import {
  asFloat32,
  checkTensorSpec,
  decodeSafetensors,
  encodeSafetensors,
  f32Tensor,
  SafetensorsError,
  type TensorMap,
} from '../storage/safetensors';
import { mulberry32, normal } from './sampling';
import { paramShapes, paramTensorSpec, sizeOf, specKey, type PolicySpec } from './spec';

/** Weight tensors by parameter name (see spec.paramShapes for names, shapes and order). */
export type PolicyWeights = Record<string, Float32Array>;

export const WEIGHTS_FORMAT = 'dartflow-policy-weights/1';

/**
 * Std of each tensor at init, and why:
 * - conv weights: He/Kaiming normal √(2/fan_in), since ReLU follows every conv;
 * - text.weight: 1, because the bag-of-words input is L2-normalised (its effective fan-in is 1), so the
 *   embedding has unit scale whatever V is;
 * - film.weight: 0.1/√E, so γ, β ≈ 0.1 at init: the visual trunk starts almost unconditioned and the
 *   text pathway still receives gradient;
 * - prev.embed: 0.5, since its input (the pooled previous action) is one-hot like the unit-norm text
 *   vector, but it should not drown the instruction at init;
 * - ctx.row/col/global: √(1/(3C)) (fanIn 3C: three context terms are summed), so the context added to
 *   h has about h's scale and the click head sees it from the first update;
 * - ctx.max (spec.clickMaxContext): 0, so the initial policy is the same as without it (no random draws);
 * - wquery.weight (spec.clickWordQuery): 0, for the same reason as query.weight; at 0 every word ties
 *   with the floor of the max, so its first gradient is split evenly among the instruction's words;
 * - query.weight: 0, so the click head starts unconditioned (the same initial policy as without the
 *   query for the same seed: no random draws) and its first gradient is Σ dclick·h'(cell) ⊗ embed;
 * - head weights (click, token): 0.1/√C, so the initial policy is near uniform (high entropy), as
 *   usual for policy-gradient heads;
 * - biases: 0, except prev.bias (below).
 */
function initStd(name: string, fanIn: number): number {
  if (name.endsWith('.bias')) return 0;
  if (name.startsWith('conv')) return Math.sqrt(2 / fanIn);
  if (name === 'text.weight') return 1;
  if (name === 'prev.embed') return 0.5;
  if (name === 'query.weight' || name === 'wquery.weight' || name === 'ctx.max') return 0;
  if (name.startsWith('ctx.')) return Math.sqrt(1 / fanIn);
  return 0.1 / Math.sqrt(fanIn);
}

/**
 * Initial logit bias for repeating an action that changed nothing (prev.bias row 1): a prior, learned
 * further, that such a repeat is unlikely to help. Without it a greedy policy whose best guess is a
 * background click (free on most pages) clicks the same spot until the step budget ends; e^−2 ≈ 0.14
 * lowers that action's odds enough for the runner-up to win a near tie but not a confident choice.
 */
export const REPEAT_NOOP_PRIOR = -2;

function initConstant(name: string, data: Float32Array): void {
  if (name === 'prev.bias') data.fill(REPEAT_NOOP_PRIOR, data.length / 2);
}

/** Deterministic weights: the same (spec, seed) gives bit-identical tensors on every machine. */
export function initWeights(spec: PolicySpec, seed: number): PolicyWeights {
  const rng = mulberry32(seed);
  const out: PolicyWeights = {};
  for (const p of paramShapes(spec)) {
    const std = initStd(p.name, p.fanIn);
    const data = new Float32Array(sizeOf(p.shape));
    if (std > 0) for (let i = 0; i < data.length; i++) data[i] = std * normal(rng);
    initConstant(p.name, data);
    out[p.name] = data;
  }
  return out;
}

/** Throws unless `weights` has exactly the spec's tensors with the right sizes and finite values. */
export function checkWeights(spec: PolicySpec, weights: PolicyWeights, where?: string): void {
  const shapes = paramShapes(spec);
  for (const p of shapes) {
    const w = weights[p.name];
    if (!w) throw new SafetensorsError(`mismatch: tensor ${p.name} is missing`, where);
    if (w.length !== sizeOf(p.shape))
      throw new SafetensorsError(
        `mismatch: tensor ${p.name} has ${w.length} values, expected ${sizeOf(p.shape)}`,
        where
      );
    for (let i = 0; i < w.length; i++) {
      if (!Number.isFinite(w[i]!))
        throw new SafetensorsError(`tensor ${p.name} holds a non-finite value at ${i}`, where);
    }
  }
  const extra = Object.keys(weights).filter((k) => !shapes.some((p) => p.name === k));
  if (extra.length) throw new SafetensorsError(`mismatch: unexpected tensors ${extra.join(', ')}`, where);
}

/** Serialises weights; the spec is recorded in the metadata so a checkpoint cannot load into another net. */
/**
 * The safetensors header of a weights object: `spec` names the network (policy/spec.specKey), so a policy
 * server builds it from the checkpoint without being told (rollout/checkpoint.ts readCheckpoint).
 */
export function weightsHeader(spec: PolicySpec, metadata: Record<string, string> = {}): Record<string, string> {
  return { ...metadata, format: WEIGHTS_FORMAT, spec: specKey(spec) };
}

export function weightsToSafetensors(
  spec: PolicySpec,
  weights: PolicyWeights,
  metadata: Record<string, string> = {}
): Buffer {
  checkWeights(spec, weights);
  const tensors: TensorMap = {};
  for (const p of paramShapes(spec)) tensors[p.name] = f32Tensor(p.shape, weights[p.name]!);
  return encodeSafetensors(tensors, weightsHeader(spec, metadata));
}

export interface LoadedWeights {
  weights: PolicyWeights;
  metadata: Record<string, string>;
  sha256: string;
}

/** Decodes and validates a checkpoint for `spec`; `where` (e.g. the object key) prefixes errors. */
export function weightsFromSafetensors(spec: PolicySpec, buf: Uint8Array, where?: string): LoadedWeights {
  const { tensors, metadata, sha256 } = decodeSafetensors(buf, where);
  if (metadata.spec !== undefined && metadata.spec !== specKey(spec)) {
    throw new SafetensorsError(
      `mismatch: checkpoint was written for spec ${metadata.spec}, expected ${specKey(spec)}${olderSpecHint(metadata.spec, spec)}`,
      where
    );
  }
  checkTensorSpec(tensors, paramTensorSpec(spec), where);
  const weights: PolicyWeights = {};
  for (const [name, t] of Object.entries(tensors)) weights[name] = asFloat32(t, name);
  checkWeights(spec, weights, where);
  return { weights, metadata, sha256 };
}

/** An explanation when a checkpoint predates this spec version (its weights cannot be converted). */
function olderSpecHint(recorded: string, spec: PolicySpec): string {
  let version: unknown;
  try {
    version = (JSON.parse(recorded) as { version?: unknown }).version;
  } catch {
    return '';
  }
  if (typeof version !== 'number' || version >= spec.version) return '';
  const changes = Object.entries(SPEC_CHANGES)
    .filter(([v]) => Number(v) > version && Number(v) <= spec.version)
    .map(([v, what]) => `spec v${v} ${what}`)
    .join(', and ');
  return ` (a policy spec v${version} checkpoint: ${changes}, so it cannot be loaded — start a new campaign or retrain)`;
}

/** What each spec version changed, for the refusal of an older checkpoint. */
const SPEC_CHANGES: Record<number, string> = {
  2: 'changed the text encoding and added the click-context and previous-action inputs',
  3: 'added the instruction query of the click head (query.weight)',
};

/** A deep copy (Adam updates weights in place; callers keep the version they serve). */
export function cloneWeights(weights: PolicyWeights): PolicyWeights {
  return Object.fromEntries(Object.entries(weights).map(([k, v]) => [k, v.slice()]));
}
