/** Deterministic random inputs and weights for the policy tests. */
import { actionMask } from '../../policy/action-space';
import { mulberry32, normal } from '../../policy/sampling';
import { IMAGE_CHANNELS, numActions, paramShapes, prevWidth, sizeOf, type PolicySpec } from '../../policy/spec';
import type { PolicyWeights } from '../../policy/weights';
import type { PolicyBatch } from '../../policy/session';

/**
 * Random weights with every tensor (biases and heads included) at a scale that makes the policy far from
 * uniform, so that gradient and forward checks exercise every path with non-trivial values.
 */
export function randomWeights(spec: PolicySpec, seed: number): PolicyWeights {
  const rng = mulberry32(seed);
  const out: PolicyWeights = {};
  for (const p of paramShapes(spec)) {
    const std =
      p.name === 'text.weight' || p.name === 'prev.bias' || p.name === 'prev.embed'
        ? 1
        : p.name.startsWith('film')
          ? 0.3
          : Math.sqrt(2 / p.fanIn);
    out[p.name] = Float32Array.from({ length: sizeOf(p.shape) }, () => std * normal(rng));
  }
  return out;
}

/**
 * Random observations in [0,1], random non-negative text vectors, masks with some actions off and (with
 * previousAction) a previous action per row: none, a changed click, an unchanged token, ... in turn.
 */
export function randomBatch(spec: PolicySpec, batch: number, seed: number): PolicyBatch {
  const rng = mulberry32(seed);
  const S = spec.imageSize;
  const obs = Float32Array.from({ length: batch * IMAGE_CHANNELS * S * S }, () => rng());
  const text = Float32Array.from({ length: batch * spec.vocabSize }, () => (rng() < 0.05 ? rng() : 0));
  const rows = Array.from({ length: batch }, (_, b) => actionMask(spec, { numFields: b % 3 }));
  const mask = new Float32Array(rows.reduce((n, r) => n + r.length, 0));
  rows.forEach((r, b) => mask.set(r, b * r.length));
  if (!spec.previousAction) return { batch, obs, text, mask };
  const A = numActions(spec);
  const prev = new Float32Array(batch * prevWidth(spec));
  for (let b = 0; b < batch; b++) {
    if (b % 4 === 3) continue; // a first step
    const changed = b % 2 === 0;
    // Alternate clicks and tokens so every (condition, click|token) path gets exercised across rows.
    const a = b % 3 === 1 ? A - 16 + Math.floor(rng() * 12) : Math.floor(rng() * (A - 16));
    prev[b * 2 * A + (changed ? 0 : A) + a] = 1;
  }
  return { batch, obs, text, mask, prev };
}

export function toF64(w: PolicyWeights): Record<string, Float64Array> {
  return Object.fromEntries(Object.entries(w).map(([k, v]) => [k, Float64Array.from(v)]));
}
