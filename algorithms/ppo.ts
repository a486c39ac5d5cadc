/**
 * PPO clipped surrogate for one step sample, with its derivative w.r.t. the current log-prob
 * (reference/dart-spec.md §4.3, verl "vanilla" compute_policy_loss).
 *
 *   ρ  = exp(clamp(logp − logp_old, −20, 20))
 *   L1 = −A·ρ
 *   L2 = −A·clip(ρ, 1 − ε_low, 1 + ε_high)
 *   L  = max(L1, L2)
 *   dual clip, only for A < 0:  L = min(L, −A·c)
 *
 * The trainer's ONNX backward graph takes one coefficient per sample, g = dLoss/dlogp(action), so every
 * loss term here returns that derivative next to its value. dρ/dlogp = ρ inside the ±20 clamp and 0
 * outside (torch.clamp passes no gradient there); each clip that is active makes its branch constant.
 */
import { InvalidArgumentError, assertFinite, clamp, withDefaults } from './common';

export interface PpoOptions {
  /** ε_low: ratio floor 1 − ε_low [§4.3: clip_ratio_low 0.1]. */
  clipLow: number;
  /** ε_high: ratio ceiling 1 + ε_high [§4.3: clip_ratio_high 0.28, DAPO-style clip-higher]. */
  clipHigh: number;
  /** Dual-clip constant c for A < 0, must be > 1; null disables it [§4.3: clip_ratio_c 10]. */
  dualClip: number | null;
  /** |logp − logp_old| clamp before exp, for stability [§4.3: 20]. */
  logRatioClamp: number;
  /** Ablation switch: false gives the plain surrogate −A·ρ (no clip, no dual clip). */
  useClip: boolean;
}

export const DEFAULT_PPO_OPTIONS: Readonly<PpoOptions> = Object.freeze({
  clipLow: 0.1,
  clipHigh: 0.28,
  dualClip: 10,
  logRatioClamp: 20,
  useClip: true,
});

export interface PpoTerm {
  /** Per-sample surrogate loss (to minimise). */
  loss: number;
  /** dLoss/dlogp for this sample. */
  dLossDLogp: number;
  /** ρ = π/π_old after the log-ratio clamp. */
  ratio: number;
  /** The ε-clip was active (L2 > L1 strictly, verl's pg_clipfrac). */
  clipped: boolean;
  /** The dual clip was active (A < 0 and L > −A·c, verl's pg_clipfrac_lower). */
  dualClipped: boolean;
}

export function resolvePpoOptions(options?: Partial<PpoOptions>): PpoOptions {
  const o = withDefaults<PpoOptions>(DEFAULT_PPO_OPTIONS, options);
  if (!(o.clipLow >= 0 && o.clipLow < 1)) throw new InvalidArgumentError(`clipLow must be in [0, 1), got ${o.clipLow}`);
  if (!(o.clipHigh >= 0) || !Number.isFinite(o.clipHigh)) {
    throw new InvalidArgumentError(`clipHigh must be finite and ≥ 0, got ${o.clipHigh}`);
  }
  // verl asserts clip_ratio_c > 1: below 1 the dual clip would cap losses of in-range ratios too.
  if (o.dualClip !== null && !(o.dualClip > 1))
    throw new InvalidArgumentError(`dualClip must be > 1, got ${o.dualClip}`);
  if (!(o.logRatioClamp > 0)) throw new InvalidArgumentError(`logRatioClamp must be > 0, got ${o.logRatioClamp}`);
  return o;
}

/**
 * The clipped surrogate of one sample. Pass options resolved once with resolvePpoOptions in hot loops,
 * or a partial override.
 */
export function ppoClippedSurrogate(
  logp: number,
  logpOld: number,
  advantage: number,
  options?: Partial<PpoOptions>
): PpoTerm {
  assertFinite(logp, 'logp');
  assertFinite(logpOld, 'logpOld');
  assertFinite(advantage, 'advantage');
  const o = resolvePpoOptions(options);

  const logRatio = logp - logpOld;
  const clampedLogRatio = clamp(logRatio, -o.logRatioClamp, o.logRatioClamp);
  const ratio = Math.exp(clampedLogRatio);
  // torch.clamp passes the gradient on the closed interval and blocks it outside.
  const dRatio = Math.abs(logRatio) <= o.logRatioClamp ? ratio : 0;
  const A = advantage;

  const unclippedLoss = -A * ratio + 0;
  // `+ 0` turns −0 (from −A·0) into 0, so "no gradient" is one value for callers that compare.
  const unclippedGrad = -A * dRatio + 0;
  if (!o.useClip) {
    return { loss: unclippedLoss, dLossDLogp: unclippedGrad, ratio, clipped: false, dualClipped: false };
  }

  const lo = 1 - o.clipLow;
  const hi = 1 + o.clipHigh;
  const clippedRatio = clamp(ratio, lo, hi);
  const clippedLoss = -A * clippedRatio;
  // max(L1, L2): L2 wins strictly only when the ratio left [lo, hi] on the side that would increase the
  // objective too much (ρ > hi with A > 0, ρ < lo with A < 0); there clip(ρ) is constant → gradient 0.
  const clipped = clippedLoss > unclippedLoss;
  let loss = clipped ? clippedLoss : unclippedLoss;
  let grad = clipped ? 0 : unclippedGrad;

  let dualClipped = false;
  if (A < 0 && o.dualClip !== null) {
    const cap = -A * o.dualClip;
    // Dual clip bounds the loss of a very large ratio with a negative advantage (ρ > c): constant there.
    if (loss > cap) {
      loss = cap;
      grad = 0;
      dualClipped = true;
    }
  }
  return { loss, dLossDLogp: grad, ratio, clipped, dualClipped };
}
