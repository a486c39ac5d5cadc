/**
 * The viewer bench's train steps as a real campaign leaves them: per consumed trajectory step a row of the
 * step's per-sample record (schemas/records.ts TrainSampleRecordSchema, JSON Lines at keys.trainSamples),
 * computed with the trainer's own algorithms (step-wise GRPO advantages over the group's step samples,
 * the top-80 % entropy mask over the batch, truncated importance weights min(π_old/π_behaviour, C)), and
 * the ledger statistics derived from those rows, so a ledger entry and its record agree the way the
 * trainer's do (activities/trainer/train-step.ts).
 *
 * Step-level values are deterministic functions of (trajectory, step), so the steps files written for
 * the sampled groups and the per-sample rows describe the same rollout.
 */
import {
  hashSeed,
  highEntropyMask,
  isWeightStats,
  stepAdvantages,
  truncatedIsWeight,
  DEFAULT_TIS_CAP,
} from '../../algorithms';
import type { TrainSampleRecord, TrajectoryManifest } from '../../schemas/records';

/** curation.maxStaleness's default: a step sampled more than this many versions before the head is left out. */
export const BENCH_MAX_STALENESS = 1;
const TOP_FRACTION = 0.8;

/** A uniform number in [0, 1) from a string (FNV-1a, then murmur3's finalizer), for per-step values that never change. */
export function unit(text: string): number {
  let h = hashSeed(text);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return ((h ^ (h >>> 16)) >>> 0) / 4294967296;
}

/** What the rollout recorded for one step (the steps file's fields the trainer reads). */
export interface SynthStep {
  policyVersion: number;
  /** log π_behaviour(a|s) as the policy server reported it. */
  behaviourLogProb: number;
  /** The step's entropy at rollout. */
  entropy: number;
}

/**
 * Step `s` of a trajectory: its first third came from minPolicyVersion when the trajectory spans two
 * versions (a reload mid-episode), the rest from maxPolicyVersion.
 */
export function synthStep(m: TrajectoryManifest, s: number): SynthStep {
  const split = m.minPolicyVersion < m.maxPolicyVersion ? Math.ceil(m.numSteps / 3) : 0;
  return {
    policyVersion: s < split ? m.minPolicyVersion : m.maxPolicyVersion,
    behaviourLogProb: -0.05 - 2.4 * unit(`${m.trajectoryId}/${s}/logp`),
    entropy: 0.2 + 2.6 * unit(`${m.trajectoryId}/${s}/entropy`),
  };
}

/** A per-sample record value rounded to 6 significant digits, as the trainer writes it. */
const compact = (x: number): number => Number(x.toPrecision(6));

export interface SynthTrainStep {
  /** Rows in batch order (group by group, trajectory by trajectory, step by step). */
  rows: TrainSampleRecord[];
  isWeight: { mean: number; min: number; truncatedFraction: number };
  metrics: Record<string, number>;
}

/**
 * One RL train step from `fromVersion` over `batch` (trajectories with a reward): rows for every step
 * within the staleness bound, with π_old drifted a little from the behaviour policy (more for older
 * steps), and the metrics the trainer reports from the same numbers.
 */
export function synthTrainStep(batch: readonly TrajectoryManifest[], fromVersion: number): SynthTrainStep {
  const samples: Array<{
    m: TrajectoryManifest;
    step: number;
    staleness: number;
    logpOld: number;
    logpBehaviour: number | null;
    entropy: number;
  }> = [];
  let staleSteps = 0;
  for (const m of batch)
    for (let s = 0; s < m.numSteps; s++) {
      const st = synthStep(m, s);
      const staleness = Math.max(0, fromVersion - st.policyVersion);
      if (staleness > BENCH_MAX_STALENESS) {
        staleSteps++;
        continue;
      }
      const drift = (unit(`${m.trajectoryId}/${s}/drift`) - 0.5) * (0.3 + 0.3 * staleness);
      samples.push({
        m,
        step: s,
        staleness,
        logpOld: Math.min(0, st.behaviourLogProb + drift),
        // Demonstrations carry no behaviour log-prob: IS weight 1 (activities/trainer/samples.ts).
        logpBehaviour: m.source === 'demo' ? null : st.behaviourLogProb,
        entropy: Math.max(0, st.entropy + (unit(`${m.trajectoryId}/${s}/dent`) - 0.5) * 0.2),
      });
    }
  const adv = stepAdvantages(
    samples.map((x) => ({ groupId: x.m.groupId, trajectoryId: x.m.trajectoryId, reward: x.m.reward ?? 0 })),
    { statisticsOver: 'steps' }
  ).advantages;
  const selection = highEntropyMask(
    samples.map((x) => x.entropy),
    { topFraction: TOP_FRACTION }
  );
  const weights = samples.map((x) => truncatedIsWeight(x.logpOld, x.logpBehaviour, DEFAULT_TIS_CAP));
  const stats = isWeightStats(weights);
  const selected = selection.reduce((a, b) => a + b, 0);
  const n = Math.max(1, samples.length);
  return {
    rows: samples.map((x, i) => ({
      trajectoryId: x.m.trajectoryId,
      step: x.step,
      advantage: compact(adv[i]!),
      selected: selection[i] === 1,
      entropy: compact(x.entropy),
      logpOld: compact(x.logpOld),
      logpBehaviour: x.logpBehaviour === null ? null : compact(x.logpBehaviour),
      isWeight: compact(weights[i]!.weight),
      staleness: x.staleness,
    })),
    isWeight: { mean: stats.mean, min: stats.min, truncatedFraction: stats.truncatedFraction },
    metrics: {
      loss: 0.3,
      kl: 0.002,
      clipFraction: 0.07,
      entropyMean: samples.reduce((a, x) => a + x.entropy, 0) / n,
      samples: samples.length,
      staleSteps,
      selectedFraction: selected / n,
      isWeightMean: stats.mean,
      isWeightMin: stats.min,
      isWeightTruncatedFraction: stats.truncatedFraction,
    },
  };
}
