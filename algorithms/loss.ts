/**
 * Loss aggregation of a step-wise GRPO minibatch (reference/dart-spec.md §4.3–§4.5), with the gradient
 * coefficients the trainer feeds to the ONNX backward graph.
 *
 * For step samples i with entropy-selection mask m_i ∈ {0,1}, TIS weight w_i, PPO term L_i and k3 KL_i:
 *
 *   total = (1/D) Σ_i m_i · ( w_i·L_i + β·KL_i − c_H·H_i )
 *
 *  - w_i multiplies the PPO term only, never the KL term (verl applies TIS inside the policy loss, §4.4);
 *  - the mask removes a step from every term (it multiplies verl's response_mask, which the KL
 *    aggregation uses too, §4.5);
 *  - D = number of selected samples: seq-mean-token-mean with one-token actions is the plain mean over
 *    step samples (§4.3). The caller may pass D explicitly when a gradient is accumulated over several
 *    calls (e.g. micro-batches of one optimiser step) so every call uses the same denominator;
 *  - c_H is an optional entropy bonus [§4.3: entropy_coeff 0]. H_i depends on all logits, not just the
 *    taken action's log-prob, so its coefficient is returned separately: gradEntropy_i = d(total)/dH_i.
 *
 * Outputs per sample:  gradLogp_i = d(total)/dlogp_i = (m_i/D)·(w_i·dL_i/dlogp_i + β·dKL_i/dlogp_i).
 */
import { InvalidArgumentError, assertFinite, withDefaults } from './common';
import { DEFAULT_ENTROPY_SELECTION_OPTIONS, highEntropyMask, type EntropySelectionScope } from './entropy-mask';
import { DEFAULT_TIS_CAP, isWeightStats, truncatedIsWeight, type IsWeight } from './importance';
import { DEFAULT_KL_BETA, DEFAULT_KL_OPTIONS, lowVarKl } from './kl';
import { DEFAULT_PPO_OPTIONS, ppoClippedSurrogate, resolvePpoOptions } from './ppo';

/** One step sample as the loss sees it (one action = one "token" for the embedded policy). */
export interface LossSample {
  /** log π_θ(a|s) under the weights being trained (the quantity gradients flow through). */
  logp: number;
  /** log π_old(a|s): the trainer's log-prob recomputed before the update (§4.3, so ρ starts at 1). */
  logpOld: number;
  /** log π_behaviour(a|s) recorded by the rollout server; null/undefined → IS weight 1 (§4.4). */
  logpBehaviour?: number | null;
  /** log π_ref(a|s) under the initial policy; required when useKl, optional metric otherwise. */
  logpRef?: number | null;
  /** GRPO advantage of the sample's trajectory (advantages.ts). */
  advantage: number;
  /** Step entropy (mean token entropy, or categorical entropy of the embedded policy). */
  entropy: number;
}

/** Field names match schemas/config.ts TrainerSchema, so `config.trainer` can be passed as is. */
export interface LossConfig {
  /** PPO ε_low [§4.3: 0.1]. */
  clipLow: number;
  /** PPO ε_high [§4.3: 0.28]. */
  clipHigh: number;
  /** Dual-clip constant c [§4.3: 10]. */
  dualClip: number;
  /** Truncated-IS cap C [§4.4: 1.0]. */
  tisCap: number;
  /** β of the k3 KL [§4.3: 0.1]. */
  klBeta: number;
  /** Top entropy fraction trained on [§4.5: 0.8]. */
  entropyTopFraction: number;
  /** Entropy-selection scope [§4.5: 'batch' in DART's code]. */
  entropySelectionScope: EntropySelectionScope;
  /** Entropy bonus coefficient c_H [§4.3: 0]. */
  entropyCoef: number;
  /** Ablation switches (issue 5 item 5); all on in DART. */
  useEntropySelection: boolean;
  useTis: boolean;
  useKl: boolean;
  useClip: boolean;
}

export const DEFAULT_LOSS_CONFIG: Readonly<LossConfig> = Object.freeze({
  clipLow: DEFAULT_PPO_OPTIONS.clipLow,
  clipHigh: DEFAULT_PPO_OPTIONS.clipHigh,
  dualClip: DEFAULT_PPO_OPTIONS.dualClip ?? 10,
  tisCap: DEFAULT_TIS_CAP,
  klBeta: DEFAULT_KL_BETA,
  entropyTopFraction: DEFAULT_ENTROPY_SELECTION_OPTIONS.topFraction,
  entropySelectionScope: DEFAULT_ENTROPY_SELECTION_OPTIONS.scope,
  entropyCoef: 0,
  useEntropySelection: true,
  useTis: true,
  useKl: true,
  useClip: true,
});

export interface LossOptions {
  /**
   * A precomputed 0/1 selection mask (same length as samples). DART selects over the whole training
   * batch, so a trainer that splits the batch into minibatches computes the mask once with
   * highEntropyMask and passes each minibatch its slice. Without it the mask is computed over `samples`.
   * Ignored when useEntropySelection is false.
   */
  selectionMask?: ArrayLike<number>;
  /** Group id per sample, needed only for entropySelectionScope 'group' without a selectionMask. */
  groupIds?: readonly string[];
  /** Denominator D of the mean (default: selected samples in this call). */
  normalizer?: number;
}

export interface LossMetrics {
  /** The total loss. */
  loss: number;
  /** Mean over selected samples of w·L (the policy-gradient part). */
  pgLoss: number;
  /** Mean k3 KL over selected samples, before β (0 when no reference log-probs were given). */
  kl: number;
  /** Fraction of selected samples where the ε-clip was active. */
  clipFraction: number;
  /** Fraction of selected samples where the dual clip was active. */
  dualClipFraction: number;
  /** Mean ratio π/π_old over selected samples. */
  ratioMean: number;
  /**
   * Truncated-IS statistics over ALL samples (a property of the data's off-policyness, reported even when
   * useTis is off — the loss then uses w = 1).
   */
  isWeightMean: number;
  isWeightMin: number;
  isWeightTruncatedFraction: number;
  /** Mean step entropy over all samples. */
  entropyMean: number;
  /** Mean step entropy over selected samples. */
  selectedEntropyMean: number;
  selectedFraction: number;
  numSamples: number;
  numSelected: number;
}

export interface LossResult {
  loss: number;
  /** d(total)/dlogp_i per sample: the backward graph's per-sample coefficient. */
  gradLogp: Float64Array;
  /** d(total)/dH_i per sample (all zero unless entropyCoef > 0). */
  gradEntropy: Float64Array;
  /** The selection mask that was applied (all ones when selection is off). */
  selectionMask: Uint8Array;
  metrics: LossMetrics;
}

export function computeLoss(
  samples: readonly LossSample[],
  config?: Partial<LossConfig>,
  options: LossOptions = {}
): LossResult {
  const cfg = withDefaults<LossConfig>(DEFAULT_LOSS_CONFIG, config);
  if (!(cfg.klBeta >= 0) || !(cfg.entropyCoef >= 0)) {
    throw new InvalidArgumentError(`klBeta and entropyCoef must be ≥ 0, got ${cfg.klBeta} and ${cfg.entropyCoef}`);
  }
  const ppoOptions = resolvePpoOptions({
    clipLow: cfg.clipLow,
    clipHigh: cfg.clipHigh,
    dualClip: cfg.dualClip,
    useClip: cfg.useClip,
  });
  const n = samples.length;

  // Refuse non-finite inputs up front, so nothing half-computed escapes.
  samples.forEach((s, i) => {
    assertFinite(s.logp, 'logp', i);
    assertFinite(s.logpOld, 'logpOld', i);
    assertFinite(s.advantage, 'advantage', i);
    assertFinite(s.entropy, 'entropy', i);
    if (s.logpBehaviour !== null && s.logpBehaviour !== undefined) assertFinite(s.logpBehaviour, 'logpBehaviour', i);
    if (s.logpRef !== null && s.logpRef !== undefined) assertFinite(s.logpRef, 'logpRef', i);
    else if (cfg.useKl && cfg.klBeta > 0) {
      throw new InvalidArgumentError(`sample ${i} has no reference log-prob but useKl is on`);
    }
  });

  const mask = selectionMaskFor(samples, cfg, options);
  let numSelected = 0;
  for (let i = 0; i < n; i++) numSelected += mask[i] as number;
  const D = options.normalizer ?? numSelected;
  if (options.normalizer !== undefined && !(options.normalizer > 0 && Number.isFinite(options.normalizer))) {
    throw new InvalidArgumentError(`normalizer must be finite and > 0, got ${options.normalizer}`);
  }

  const isWeights: IsWeight[] = samples.map((s) => truncatedIsWeight(s.logpOld, s.logpBehaviour, cfg.tisCap));
  const gradLogp = new Float64Array(n);
  const gradEntropy = new Float64Array(n);
  let pgSum = 0;
  let klSum = 0;
  let entropySum = 0;
  let selectedEntropySum = 0;
  let ratioSum = 0;
  let clippedCount = 0;
  let dualClippedCount = 0;

  for (let i = 0; i < n; i++) {
    const s = samples[i] as LossSample;
    entropySum += s.entropy;
    if (mask[i] === 0) continue;

    const ppo = ppoClippedSurrogate(s.logp, s.logpOld, s.advantage, ppoOptions);
    const w = cfg.useTis ? (isWeights[i] as IsWeight).weight : 1;
    const hasRef = s.logpRef !== null && s.logpRef !== undefined;
    const klTerm = hasRef ? lowVarKl(s.logp, s.logpRef as number, DEFAULT_KL_OPTIONS) : { kl: 0, dKlDLogp: 0 };
    const beta = cfg.useKl ? cfg.klBeta : 0;

    pgSum += w * ppo.loss;
    klSum += klTerm.kl;
    ratioSum += ppo.ratio;
    selectedEntropySum += s.entropy;
    if (ppo.clipped) clippedCount++;
    if (ppo.dualClipped) dualClippedCount++;

    // `+ 0` normalises −0 to 0 (a zero coefficient should look like one).
    gradLogp[i] = (w * ppo.dLossDLogp + beta * klTerm.dKlDLogp) / D + 0;
    gradEntropy[i] = -cfg.entropyCoef / D + 0;
  }

  const beta = cfg.useKl ? cfg.klBeta : 0;
  // Empty selection: nothing to train; loss 0 and zero gradients rather than 0/0 = NaN.
  const loss = numSelected === 0 ? 0 : (pgSum + beta * klSum - cfg.entropyCoef * selectedEntropySum) / D;
  const meanSel = (x: number): number => (numSelected === 0 ? 0 : x / numSelected);
  const isStats = isWeightStats(isWeights);
  return {
    loss,
    gradLogp,
    gradEntropy,
    selectionMask: mask,
    metrics: {
      loss,
      pgLoss: meanSel(pgSum),
      kl: meanSel(klSum),
      clipFraction: meanSel(clippedCount),
      dualClipFraction: meanSel(dualClippedCount),
      ratioMean: meanSel(ratioSum),
      isWeightMean: isStats.mean,
      isWeightMin: isStats.min,
      isWeightTruncatedFraction: isStats.truncatedFraction,
      entropyMean: n === 0 ? 0 : entropySum / n,
      selectedEntropyMean: meanSel(selectedEntropySum),
      selectedFraction: n === 0 ? 0 : numSelected / n,
      numSamples: n,
      numSelected,
    },
  };
}

function selectionMaskFor(samples: readonly LossSample[], cfg: LossConfig, options: LossOptions): Uint8Array {
  const n = samples.length;
  if (!cfg.useEntropySelection) return new Uint8Array(n).fill(1);
  if (options.selectionMask) {
    const given = options.selectionMask;
    if (given.length !== n) {
      throw new InvalidArgumentError(`selectionMask has ${given.length} entries for ${n} samples`);
    }
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const m = given[i];
      if (m !== 0 && m !== 1) throw new InvalidArgumentError(`selectionMask[${i}] must be 0 or 1, got ${String(m)}`);
      mask[i] = m;
    }
    return mask;
  }
  return highEntropyMask(
    samples.map((s) => s.entropy),
    { topFraction: cfg.entropyTopFraction, scope: cfg.entropySelectionScope },
    options.groupIds
  );
}
