/**
 * Truncated importance sampling between the behaviour policy (the rollout server that sampled the action)
 * and the trainer's old policy (reference/dart-spec.md §4.4, DART "Distribution Alignment for OOD Tokens"):
 *
 *   w = min(exp(logp_old − logp_behaviour), C),   C = 1
 *
 * With C = 1 it only down-weights actions the trainer now finds less likely than the sampler did; it never
 * up-weights. w depends only on logp_old and logp_behaviour, which are constants during the update, so it
 * contributes no gradient of its own: it just scales the PPO term's loss and derivative.
 */
import { InvalidArgumentError, assertFinite } from './common';

/** Default cap C [§4.4: 1.0, read from DART's code; one experimental fork used 0.5]. */
export const DEFAULT_TIS_CAP = 1.0;

export interface IsWeight {
  weight: number;
  /** The raw ratio exceeded C and was cut to C. */
  truncated: boolean;
}

/**
 * The truncated IS weight of one sample. A missing behaviour log-prob (null/undefined: e.g. an imported
 * demonstration, or a policy server that returned none) gives w = 1, as DART substitutes the trainer's own
 * log-prob for all-zero vLLM log-probs (§4.4). Note 0 is NOT treated as missing here: for a single
 * categorical action logp = 0 is a legitimate probability-1 choice.
 */
export function truncatedIsWeight(
  logpOld: number,
  logpBehaviour: number | null | undefined,
  cap: number = DEFAULT_TIS_CAP
): IsWeight {
  if (!(cap > 0)) throw new InvalidArgumentError(`TIS cap must be > 0, got ${cap}`);
  assertFinite(logpOld, 'logpOld');
  if (logpBehaviour === null || logpBehaviour === undefined) return { weight: Math.min(1, cap), truncated: cap < 1 };
  assertFinite(logpBehaviour, 'logpBehaviour');
  // exp may overflow to Infinity for a huge log ratio; min(Infinity, C) = C is still the right answer.
  const raw = Math.exp(logpOld - logpBehaviour);
  return raw > cap ? { weight: cap, truncated: true } : { weight: raw, truncated: false };
}

export interface IsWeightStats {
  count: number;
  mean: number;
  min: number;
  /** Fraction of samples whose raw ratio was cut to C. */
  truncatedFraction: number;
}

/** Mean, min and truncated fraction of IS weights. An empty set reports the neutral weight 1 with count 0. */
export function isWeightStats(weights: readonly IsWeight[]): IsWeightStats {
  if (weights.length === 0) return { count: 0, mean: 1, min: 1, truncatedFraction: 0 };
  let sum = 0;
  let min = Infinity;
  let truncated = 0;
  for (const w of weights) {
    sum += w.weight;
    if (w.weight < min) min = w.weight;
    if (w.truncated) truncated++;
  }
  return { count: weights.length, mean: sum / weights.length, min, truncatedFraction: truncated / weights.length };
}
