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
