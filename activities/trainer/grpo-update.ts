/**
 * One step-wise GRPO update of the embedded policy on a batch of step samples, in memory: what `trainStep`
 * does between loading the samples and committing the checkpoint (DART §4: π_old recomputed with the
 * current weights, step-wise advantages, high-entropy step selection, PPO clip + dual clip, truncated IS,
 * k3 KL to the reference, Adam with global gradient-norm clipping). `runTrainStep` and the offline probe
 * (bench/colour-probe.ts) both call it, so the probe measures the trainer's own update.
 *
 * Stability guard (issue 14.3): `trainer.targetKl` stops a step's remaining minibatch updates once the
 * policy has moved that far from π_old on the batch (the k3 estimate of KL(π_old ‖ π_θ) over the minibatch
 * about to be trained, measured before its update; PPO's "target_kl" early stop). The update's size is
 * reported as `updateNorm` (‖θ_new − θ_old‖₂ over all weights) and `approxKl` (the last such estimate).
 */
import {
  adamStep,
  computeLoss,
  highEntropyMask,
  meanApproxKl,
  shuffled,
  stepAdvantages,
  type AdamState,
  type LossSample,
  type Prng,
} from '../../algorithms';
import { packBatch, type ObservationRow, type PolicyTrainSession, type TrainBatch } from '../../policy/session';
import { drawAnchorRows } from './demo-anchor';
import { numActions, type PolicySpec } from '../../policy/spec';
import type { CampaignConfig } from '../../schemas/config';

/** A step sample as the update needs it: the observation, the taken action and its trajectory's reward. */
export interface GrpoSample extends ObservationRow {
  groupId: string;
  trajectoryId: string;
  reward: number;
  action: number;
  /** log π_behaviour(a|s) from the rollout server; null → IS weight 1. */
  behaviourLogProb: number | null;
}

export interface GrpoUpdateArgs {
  session: PolicyTrainSession;
  spec: PolicySpec;
  /** Trained in place. */
  weights: Record<string, Float32Array>;
  /** Updated in place. */
  optimizer: AdamState;
  samples: readonly GrpoSample[];
  trainer: CampaignConfig['trainer'];
  /** Weights of the KL reference; the KL term is used only when given (and useKl, klBeta > 0). */
  referenceWeights?: Record<string, Float32Array>;
  /**
   * Demonstration steps of the behaviour-cloning start (trainer.demoAnchorCoef > 0, demo-anchor.ts): each
   * minibatch adds demoAnchorSamples of them with the gradient of coef × mean −log π(a_demo|s).
   */
  anchor?: ReadonlyArray<ObservationRow & { action: number }>;
  /** Minibatch order (and the anchor rows drawn for each minibatch). */
  rng: Prng;
  heartbeat?: (details: Record<string, unknown>) => void;
}

export interface GrpoUpdateResult {
  /** log π_old(a|s) and H(π_old(·|s)) per sample (before the update). */
  old: { logp: Float64Array; entropy: Float64Array };
  advantages: Float64Array;
  selection: Uint8Array;
  /** Loss metrics (means over trained selected samples) plus update statistics. */
  metrics: Record<string, number>;
}

/** log π(a_i|s_i) and H_i of every sample under `weights`, in chunks (`onChunk` after each: heartbeats). */
export async function actionLogProbs(
  session: PolicyTrainSession,
  weights: Record<string, Float32Array>,
  spec: PolicySpec,
  rows: ReadonlyArray<ObservationRow & { action: number }>,
  chunk: number,
  onChunk: (done: number) => void = () => undefined
): Promise<{ logp: Float64Array; entropy: Float64Array }> {
  const A = numActions(spec);
  const logp = new Float64Array(rows.length);
  const entropy = new Float64Array(rows.length);
  for (let start = 0; start < rows.length; start += chunk) {
    const part = rows.slice(start, start + chunk);
    const out = await session.forward(weights, packBatch(spec, part));
    part.forEach((r, i) => {
      logp[start + i] = out.logp[i * A + r.action]!;
      entropy[start + i] = out.entropy[i]!;
    });
    onChunk(start + part.length);
  }
  return { logp, entropy };
}

/** ‖a − b‖₂ over every tensor of two weight maps with the same names and shapes. */
export function weightDistance(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  let sq = 0;
  for (const name of Object.keys(a).sort()) {
    const x = a[name]!;
    const y = b[name]!;
    for (let i = 0; i < x.length; i++) sq += (x[i]! - y[i]!) ** 2;
  }
  return Math.sqrt(sq);
}

export async function grpoUpdate(args: GrpoUpdateArgs): Promise<GrpoUpdateResult> {
  const { session, spec, weights, optimizer, samples, trainer: cfg, rng } = args;
  const heartbeat = args.heartbeat ?? (() => undefined);
  const mbSize = cfg.minibatchSize;
  const before = Object.fromEntries(Object.entries(weights).map(([k, v]) => [k, v.slice()]));
  const passHeartbeat = (phase: string) => (done: number) =>
    heartbeat({ phase, samplesDone: done, samples: samples.length });
  // π_old: recomputed with the current weights just before the update (so ρ starts at 1, §4.3).
  const old = await actionLogProbs(session, weights, spec, samples, mbSize, passHeartbeat('old-logprobs'));
  const useKl = cfg.useKl && cfg.klBeta > 0 && args.referenceWeights !== undefined;
  const ref = useKl
    ? await actionLogProbs(session, args.referenceWeights!, spec, samples, mbSize, passHeartbeat('reference-logprobs'))
    : undefined;
  const advantages = stepAdvantages(
    samples.map((s) => ({ groupId: s.groupId, trajectoryId: s.trajectoryId, reward: s.reward })),
    { statisticsOver: cfg.advantageStatistics }
  ).advantages;
  const selection = cfg.useEntropySelection
    ? highEntropyMask(old.entropy, { topFraction: cfg.entropyTopFraction })
    : new Uint8Array(samples.length).fill(1);
  const totalSelected = selection.reduce((a, b) => a + b, 0);
  const learningRate = cfg.rlLearningRate ?? cfg.learningRate;

  const metricSums: Record<string, number> = {};
  let weightTotal = 0;
  let gradNormSum = 0;
  let updates = 0;
  let approxKl = 0;
  let stoppedEarly = 0;
  const anchorOn = cfg.demoAnchorCoef > 0 && (args.anchor?.length ?? 0) > 0;
  let anchorNllSum = 0;
  outer: for (let epoch = 0; epoch < cfg.epochs; epoch++) {
    const order = shuffled(
      samples.map((_, i) => i),
      rng
    );
    for (let start = 0; start < order.length; start += mbSize) {
      const idx = order.slice(start, start + mbSize);
      const rows = idx.map((i) => samples[i]!);
      const now = await actionLogProbs(session, weights, spec, rows, mbSize);
      const mbSelection = idx.map((i) => selection[i]!);
      const selectedHere = mbSelection.reduce((a, b) => a + b, 0);
      if (selectedHere === 0) continue;
      // How far the policy already moved from π_old on this minibatch (its selected samples).
      const selIdx = idx.map((_, j) => j).filter((j) => mbSelection[j] === 1);
      approxKl = meanApproxKl(
        selIdx.map((j) => old.logp[idx[j]!]!),
        selIdx.map((j) => now.logp[j]!)
      );
      if (cfg.targetKl !== null && updates > 0 && approxKl > cfg.targetKl) {
        stoppedEarly = 1;
        break outer;
      }
      const lossSamples: LossSample[] = idx.map((i, j) => ({
        logp: now.logp[j]!,
        logpOld: old.logp[i]!,
        logpBehaviour: samples[i]!.behaviourLogProb,
        logpRef: ref ? ref.logp[i]! : null,
        advantage: advantages[i]!,
        entropy: now.entropy[j]!,
      }));
      const loss = computeLoss(
        lossSamples,
        { ...cfg, useKl },
        { selectionMask: mbSelection, normalizer: selectedHere }
      );
      // The anchor rows ride in the same backward pass: ∂/∂logp of coef × mean(−log π) is −coef/k each.
      const anchorRows = anchorOn
        ? drawAnchorRows(args.anchor!.length, cfg.demoAnchorSamples, (k) => rng.nextInt(k)).map((i) => args.anchor![i]!)
        : [];
      const k = anchorRows.length;
      const batch: TrainBatch = {
        ...packBatch(spec, [...rows, ...anchorRows]),
        actions: [...rows.map((r) => r.action), ...anchorRows.map((r) => r.action)],
        g: Float32Array.from([...loss.gradLogp, ...new Array<number>(k).fill(-cfg.demoAnchorCoef / Math.max(1, k))]),
        entCoef: Float32Array.from([...loss.gradEntropy, ...new Array<number>(k).fill(0)]),
      };
      const { grads, logpAction } = await session.gradients(weights, batch);
      if (k > 0) anchorNllSum -= logpAction.slice(rows.length).reduce((a, b) => a + b, 0) / k;
      const step = adamStep(weights, grads, optimizer, {
        learningRate,
        beta1: cfg.adamBeta1,
        beta2: cfg.adamBeta2,
        weightDecay: cfg.weightDecay,
        maxGradNorm: cfg.gradClip,
      });
      for (const [k, v] of Object.entries(loss.metrics)) metricSums[k] = (metricSums[k] ?? 0) + v * selectedHere;
      weightTotal += selectedHere;
      gradNormSum += step.gradNorm;
      updates++;
      heartbeat({ phase: 'training', epoch, minibatch: updates });
    }
  }
  const metrics: Record<string, number> = {
    ...Object.fromEntries(
      Object.entries(metricSums)
        .filter(([k]) => !['numSamples', 'numSelected'].includes(k))
        .map(([k, v]) => [k, v / Math.max(1, weightTotal)])
    ),
    gradNorm: updates ? gradNormSum / updates : 0,
    optimizerSteps: updates,
    selectedFraction: samples.length ? totalSelected / samples.length : 0,
    approxKl,
    stoppedEarly,
    updateNorm: weightDistance(weights, before),
    // With the anchor on, every update carried anchor rows.
    ...(anchorOn ? { anchorNll: anchorNllSum / Math.max(1, updates) } : {}),
  };
  return { old, advantages, selection, metrics };
}
