/**
 * k3 ("low_var_kl") estimator of KL(π_θ ‖ π_ref) for one sampled action, with its derivative w.r.t. the
 * current log-prob (reference/dart-spec.md §4.3; Schulman 2020, "Approximating KL divergence").
 *
 *   d  = clamp(logp_ref − logp, −20, 20)
 *   kl = clamp(exp(d) − d − 1, −10, 10)
 *
 * The two clamps are verl's kl_penalty("low_var_kl") as shipped in DART's tree
 * (DG:verl/trainer/ppo/core_algos.py): ±20 on the log ratio before exp and ±10 on the estimate. §4.3
 * names the estimator but not the clamps; we keep verl's, so a policy far from the reference gets a
 * bounded (and then gradient-free) penalty rather than an exploding one. Since exp(d) − d − 1 ≥ 0 the lower
 * clamp never binds.
 *
 * Derivative: dkl/dlogp = (exp(d) − 1)·dd/dlogp = 1 − exp(d) inside both clamps, 0 where either is active.
 */
import { InvalidArgumentError, assertFinite, withDefaults } from './common';

export interface KlOptions {
  /** Clamp on logp_ref − logp before exp [verl low_var_kl: 20]. */
  logRatioClamp: number;
  /** Clamp on the estimate [verl low_var_kl: 10]. */
  klClamp: number;
}

export const DEFAULT_KL_OPTIONS: Readonly<KlOptions> = Object.freeze({ logRatioClamp: 20, klClamp: 10 });

/** β, the KL coefficient in loss = pg + β·kl [§4.3: kl_loss_coef 0.1]. */
export const DEFAULT_KL_BETA = 0.1;

export interface KlTerm {
  kl: number;
  dKlDLogp: number;
}

export function lowVarKl(logp: number, logpRef: number, options?: Partial<KlOptions>): KlTerm {
  assertFinite(logp, 'logp');
  assertFinite(logpRef, 'logpRef');
  const o = withDefaults<KlOptions>(DEFAULT_KL_OPTIONS, options);
  if (!(o.logRatioClamp > 0) || !(o.klClamp > 0)) {
    throw new InvalidArgumentError(`KL clamps must be > 0, got ${o.logRatioClamp} and ${o.klClamp}`);
  }
  const rawD = logpRef - logp;
  const d = Math.max(-o.logRatioClamp, Math.min(o.logRatioClamp, rawD));
  const ratio = Math.exp(d);
  const rawKl = ratio - d - 1;
  const kl = Math.min(o.klClamp, Math.max(-o.klClamp, rawKl));
  const inside = Math.abs(rawD) <= o.logRatioClamp && Math.abs(rawKl) <= o.klClamp;
  return { kl, dKlDLogp: inside ? 1 - ratio : 0 };
}

/**
 * Mean k3 estimate of KL(π_old ‖ π_θ) over actions sampled from π_old (Schulman 2020):
 *
 *   r_i = exp(logp_i − logpOld_i),   KL ≈ (1/n) Σ_i (r_i − 1 − log r_i)   (every term ≥ 0)
 *
 * How far an update has moved the policy on a batch — the quantity PPO's "target_kl" early stop reads.
 * log r is clamped to ±20 as in lowVarKl, so a runaway sample gives a large but finite value. 0 for n = 0.
 */
export function meanApproxKl(logpOld: ArrayLike<number>, logp: ArrayLike<number>): number {
  if (logpOld.length !== logp.length) {
    throw new InvalidArgumentError(`meanApproxKl: ${logpOld.length} old log-probs for ${logp.length} new ones`);
  }
  let sum = 0;
  for (let i = 0; i < logp.length; i++) {
    assertFinite(logpOld[i] as number, 'logpOld', i);
    assertFinite(logp[i] as number, 'logp', i);
    const d = Math.max(-20, Math.min(20, (logp[i] as number) - (logpOld[i] as number)));
    sum += Math.exp(d) - 1 - d;
  }
  return logp.length === 0 ? 0 : sum / logp.length;
}
