/** Deterministic random inputs and weights for the policy tests. */
import { actionMask } from '../../policy/action-space';
import { mulberry32, normal } from '../../policy/sampling';
import { IMAGE_CHANNELS, paramShapes, sizeOf, type PolicySpec } from '../../policy/spec';
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
    const std = p.name === 'text.weight' ? 1 : p.name.startsWith('film') ? 0.3 : Math.sqrt(2 / p.fanIn);
    out[p.name] = Float32Array.from({ length: sizeOf(p.shape) }, () => std * normal(rng));
  }
  return out;
}

/** Random observations in [0,1], random non-negative text vectors, and masks with some actions off. */
export function randomBatch(spec: PolicySpec, batch: number, seed: number): PolicyBatch {
  const rng = mulberry32(seed);
  const S = spec.imageSize;
  const obs = Float32Array.from({ length: batch * IMAGE_CHANNELS * S * S }, () => rng());
  const text = Float32Array.from({ length: batch * spec.vocabSize }, () => (rng() < 0.05 ? rng() : 0));
  const rows = Array.from({ length: batch }, (_, b) => actionMask(spec, { numFields: b % 3 }));
  const mask = new Float32Array(rows.reduce((n, r) => n + r.length, 0));
  rows.forEach((r, b) => mask.set(r, b * r.length));
  return { batch, obs, text, mask };
}

export function toF64(w: PolicyWeights): Record<string, Float64Array> {
  return Object.fromEntries(Object.entries(w).map(([k, v]) => [k, Float64Array.from(v)]));
}
