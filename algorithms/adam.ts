/**
 * AdamW over named Float32Array parameters, with global-norm gradient clipping — what torch.optim.AdamW
 * plus clip_grad_norm_ do in DART's FSDP trainer (reference/dart-spec.md §6.2).
 *
 *   clip:   g ← g · min(1, maxNorm / (‖g‖₂ + 1e-6))      (‖g‖ over ALL parameters together)
 *   decay:  θ ← θ · (1 − lr·λ)                             (decoupled, AdamW)
 *   moments m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
 *   step:   θ ← θ − lr · m̂ / (√v̂ + ε),  m̂ = m/(1−β1^t), v̂ = v/(1−β2^t)
 *
 * Non-finite gradients are refused with a typed error before anything is touched (verl skips the
 * optimiser step when the grad norm is not finite). The state (step, m, v) converts to and from a flat
 * tensor map, so storage can checkpoint it next to the weights (e.g. as safetensors).
 */
import { InvalidArgumentError, withDefaults } from './common';

export type ParameterMap = Readonly<Record<string, Float32Array>>;

export interface AdamOptions {
  /** Learning rate [§6.2: 1e-6 in DART's runs for a 7B VLM; the embedded CNN's config uses 3e-3]. */
  learningRate: number;
  /** β1 [torch / verl default 0.9]. */
  beta1: number;
  /** β2 [torch / verl default 0.999]. */
  beta2: number;
  /** ε [torch default 1e-8]. */
  epsilon: number;
  /** Decoupled weight decay λ [§6.2: 0.1]. */
  weightDecay: number;
  /** Global gradient-norm clip [§6.2: grad_clip 2.0]; null disables clipping. */
  maxGradNorm: number | null;
}

export const DEFAULT_ADAM_OPTIONS: Readonly<AdamOptions> = Object.freeze({
  learningRate: 1e-6,
  beta1: 0.9,
  beta2: 0.999,
  epsilon: 1e-8,
  weightDecay: 0.1,
  maxGradNorm: 2.0,
});

export interface AdamState {
  /** Optimiser steps taken so far (t in the bias correction). */
  step: number;
  m: Record<string, Float32Array>;
  v: Record<string, Float32Array>;
}

export interface AdamStepResult {
  /** Global L2 norm of the raw gradients (before clipping). */
  gradNorm: number;
  /** Factor the gradients were scaled by (1 when not clipped). */
  clipScale: number;
  /** The step number just taken. */
  step: number;
}

/** A gradient held NaN or ±Infinity; parameters and optimiser state were left untouched. */
export class NonFiniteGradientError extends Error {
  override readonly name = 'NonFiniteGradientError';
  constructor(
    readonly parameter: string,
    readonly index: number,
    readonly value: number
  ) {
    super(`gradient of ${parameter}[${index}] is not finite (${String(value)}); step refused, parameters untouched`);
  }
}

/** Fresh state: zero moments shaped like the parameters, step 0. */
export function createAdamState(params: ParameterMap): AdamState {
  const m: Record<string, Float32Array> = {};
  const v: Record<string, Float32Array> = {};
  for (const name of sortedNames(params)) {
    const p = params[name] as Float32Array;
    m[name] = new Float32Array(p.length);
    v[name] = new Float32Array(p.length);
  }
  return { step: 0, m, v };
}

/**
 * Global L2 norm over all gradients, summed in sorted-name order in float64 (a fixed order makes the
 * result bit-reproducible). Throws NonFiniteGradientError on NaN/Infinity.
 */
export function globalGradNorm(grads: ParameterMap): number {
  let squares = 0;
  for (const name of sortedNames(grads)) {
    const g = grads[name] as Float32Array;
    for (let i = 0; i < g.length; i++) {
      const x = g[i] as number;
      if (!Number.isFinite(x)) throw new NonFiniteGradientError(name, i, x);
      squares += x * x;
    }
  }
  return Math.sqrt(squares);
}

/** One AdamW step, in place on `params` and `state`. Validates everything first; on error nothing changes. */
export function adamStep(
  params: ParameterMap,
  grads: ParameterMap,
  state: AdamState,
  options?: Partial<AdamOptions>
): AdamStepResult {
  const o = resolveAdamOptions(options);
  const names = sortedNames(params);
  checkSameShapes(params, grads, 'gradients');
  checkSameShapes(params, state.m, 'state.m');
  checkSameShapes(params, state.v, 'state.v');
  if (!Number.isInteger(state.step) || state.step < 0) {
    throw new InvalidArgumentError(`state.step must be a non-negative integer, got ${state.step}`);
  }

  const gradNorm = globalGradNorm(grads); // throws before any mutation
  // torch.nn.utils.clip_grad_norm_: scale = maxNorm / (norm + 1e-6), applied only when < 1.
  const clipScale = o.maxGradNorm === null ? 1 : Math.min(1, o.maxGradNorm / (gradNorm + 1e-6));

  const t = state.step + 1;
  const bias1 = 1 - o.beta1 ** t;
  const bias2 = 1 - o.beta2 ** t;
  const decay = 1 - o.learningRate * o.weightDecay;
  for (const name of names) {
    const p = params[name] as Float32Array;
    const g = grads[name] as Float32Array;
    const m = state.m[name] as Float32Array;
    const v = state.v[name] as Float32Array;
    for (let i = 0; i < p.length; i++) {
      const gi = (g[i] as number) * clipScale;
      const mi = o.beta1 * (m[i] as number) + (1 - o.beta1) * gi;
      const vi = o.beta2 * (v[i] as number) + (1 - o.beta2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      const mHat = mi / bias1;
      const vHat = vi / bias2;
      p[i] = (p[i] as number) * decay - (o.learningRate * mHat) / (Math.sqrt(vHat) + o.epsilon);
    }
  }
  state.step = t;
  return { gradNorm, clipScale, step: t };
}

/** Flatten the state for a checkpoint: tensors `m.<name>` and `v.<name>`, plus the step count. */
export function adamStateToTensors(state: AdamState): { step: number; tensors: Record<string, Float32Array> } {
  const tensors: Record<string, Float32Array> = {};
  for (const name of Object.keys(state.m).sort()) tensors[`m.${name}`] = (state.m[name] as Float32Array).slice();
  for (const name of Object.keys(state.v).sort()) tensors[`v.${name}`] = (state.v[name] as Float32Array).slice();
  return { step: state.step, tensors };
}

/** Rebuild state from adamStateToTensors' output, checking it matches the parameters' names and shapes. */
export function adamStateFromTensors(
  step: number,
  tensors: Readonly<Record<string, Float32Array>>,
  params: ParameterMap
): AdamState {
  if (!Number.isInteger(step) || step < 0)
    throw new InvalidArgumentError(`step must be a non-negative integer, got ${step}`);
  const state: AdamState = { step, m: {}, v: {} };
  for (const name of sortedNames(params)) {
    const p = params[name] as Float32Array;
    for (const kind of ['m', 'v'] as const) {
      const t = tensors[`${kind}.${name}`];
      if (!t || t.length !== p.length) {
        throw new InvalidArgumentError(`optimizer tensor ${kind}.${name} is missing or has the wrong length`);
      }
      state[kind][name] = t.slice();
    }
  }
  const expected = 2 * Object.keys(params).length;
  if (Object.keys(tensors).length !== expected) {
    throw new InvalidArgumentError(`optimizer state has ${Object.keys(tensors).length} tensors, expected ${expected}`);
  }
  return state;
}

export function resolveAdamOptions(options?: Partial<AdamOptions>): AdamOptions {
  const o = withDefaults<AdamOptions>(DEFAULT_ADAM_OPTIONS, options);
  const bad = (msg: string): never => {
    throw new InvalidArgumentError(msg);
  };
  if (!(o.learningRate >= 0) || !Number.isFinite(o.learningRate))
    bad(`learningRate must be finite ≥ 0, got ${o.learningRate}`);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) bad(`beta1 must be in [0, 1), got ${o.beta1}`);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) bad(`beta2 must be in [0, 1), got ${o.beta2}`);
  if (!(o.epsilon > 0)) bad(`epsilon must be > 0, got ${o.epsilon}`);
  if (!(o.weightDecay >= 0)) bad(`weightDecay must be ≥ 0, got ${o.weightDecay}`);
  if (o.maxGradNorm !== null && !(o.maxGradNorm > 0)) bad(`maxGradNorm must be > 0 or null, got ${o.maxGradNorm}`);
  return o;
}

function sortedNames(map: ParameterMap): string[] {
  return Object.keys(map).sort();
}

function checkSameShapes(params: ParameterMap, other: ParameterMap, what: string): void {
  const a = sortedNames(params);
  const b = sortedNames(other);
  if (a.length !== b.length || a.some((name, i) => name !== b[i])) {
    throw new InvalidArgumentError(`${what} names [${b.join(', ')}] do not match parameters [${a.join(', ')}]`);
  }
  for (const name of a) {
    if ((other[name] as Float32Array).length !== (params[name] as Float32Array).length) {
      throw new InvalidArgumentError(`${what}.${name} has a different length than the parameter`);
    }
  }
}
