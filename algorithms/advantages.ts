/**
 * Step-wise GRPO advantages (reference/dart-spec.md §4.1–§4.2).
 *
 * A group is the episodes of one task and seed. Every step of a trajectory is one training sample that
 * carries its trajectory's reward R, and every step gets the same advantage
 *
 *   A = (R − mean_g) / (std_g + ε)        (ε = 1e-6)
 *
 * Which population mean_g / std_g are taken over matters when trajectories have different lengths:
 *  - 'steps' (DART's code, the default): over all step samples of the group in the batch, so a
 *    trajectory of 12 steps weighs 12 times in the statistics and long trajectories pull the baseline
 *    (verl's compute_grpo_outcome_advantage runs on the step-sample batch, §4.2).
 *  - 'trajectories': each trajectory once, the textbook GRPO reading of the paper's formula.
 * Both use Bessel's (unbiased) std, as torch.std does. A group whose statistics population has a single
 * element gets mean 0 and std 1 (verl's rule), so its advantage is R / (1 + ε).
 */
import { InvalidArgumentError, assertFinite, assertNonNegativeInteger, withDefaults } from './common';

export type AdvantageStatisticsOver = 'steps' | 'trajectories';

export interface AdvantageOptions {
  /** ε added to the std [§4.2: 1e-6]. */
  epsilon: number;
  /** Population of the group statistics [§4.2: 'steps', DART's code]. */
  statisticsOver: AdvantageStatisticsOver;
  /** Divide by the group std [§4.2: norm_adv_by_std_in_grpo = true]; false gives Dr.GRPO's R − mean. */
  normalizeByStd: boolean;
  /** Bessel-corrected std [§4.2: unbiased, torch.std]. */
  unbiasedStd: boolean;
}

export const DEFAULT_ADVANTAGE_OPTIONS: Readonly<AdvantageOptions> = Object.freeze({
  epsilon: 1e-6,
  statisticsOver: 'steps',
  normalizeByStd: true,
  unbiasedStd: true,
});

/** One trajectory of a group: its reward and how many step samples it contributes. */
export interface GroupTrajectory {
  reward: number;
  numSteps: number;
}

export interface GroupStatistics {
  /** Size of the statistics population (steps or trajectories, per the option). */
  count: number;
  mean: number;
  std: number;
}

export interface GroupAdvantages {
  /** One advantage per input trajectory, in input order; broadcast it to each of its steps. */
  advantages: number[];
  stats: GroupStatistics;
}

/** Advantages of the trajectories of ONE group. */
export function groupAdvantages(
  trajectories: readonly GroupTrajectory[],
  options?: Partial<AdvantageOptions>
): GroupAdvantages {
  const opts = resolveOptions(options);
  trajectories.forEach((t, i) => {
    assertFinite(t.reward, 'reward', i);
    assertNonNegativeInteger(t.numSteps, `numSteps[${i}]`);
  });

  // Frequency weights: repeating a reward numSteps times and weighting it by numSteps give the same
  // mean and Bessel std, without materialising the step samples.
  const weight = (t: GroupTrajectory): number => (opts.statisticsOver === 'steps' ? t.numSteps : 1);
  let count = 0;
  let sum = 0;
  for (const t of trajectories) {
    count += weight(t);
    sum += weight(t) * t.reward;
  }

  let mean: number;
  let std: number;
  if (count === 0) {
    // No step samples at all (only zero-step trajectories): nothing is trained, advantage 0.
    return { advantages: trajectories.map(() => 0), stats: { count: 0, mean: 0, std: 0 } };
  } else if (count === 1) {
    // verl: a one-element group gets mean 0 and std 1 (§4.2).
    mean = 0;
    std = 1;
  } else {
    mean = sum / count;
    let squares = 0;
    for (const t of trajectories) squares += weight(t) * (t.reward - mean) ** 2;
    std = Math.sqrt(squares / (opts.unbiasedStd ? count - 1 : count));
  }

  // All rewards equal → exactly zero. Computing (R − mean) would leave round-off such as 1e-16 / 1e-6
  // = 1e-10 for rewards like 0.7 that do not sum exactly.
  const counted = trajectories.filter((t) => weight(t) > 0);
  const first = counted[0];
  const allEqual = count > 1 && first !== undefined && counted.every((t) => t.reward === first.reward);

  const advantages = trajectories.map((t) => {
    if (allEqual) return 0;
    const centred = t.reward - mean;
    return opts.normalizeByStd ? centred / (std + opts.epsilon) : centred;
  });
  return { advantages, stats: { count, mean, std } };
}

/** A step sample: which group and trajectory it belongs to and the trajectory's reward. */
export interface StepRewardSample {
  groupId: string;
  trajectoryId: string;
  reward: number;
}

export interface StepAdvantages {
  /** One advantage per step sample, in input order. */
  advantages: Float64Array;
  /** Statistics per group id. */
  groups: Map<string, GroupStatistics>;
}

/**
 * Advantages for a batch of step samples, grouped by groupId (DART: over all step samples of the group
 * in the current batch, after any up/down-sampling — so a duplicated sample counts twice, as in DART).
 * All steps of a trajectory must carry the same reward.
 */
export function stepAdvantages(
  samples: readonly StepRewardSample[],
  options?: Partial<AdvantageOptions>
): StepAdvantages {
  const opts = resolveOptions(options);
  // groupId → trajectoryId → { reward, numSteps }; insertion order keeps the result deterministic.
  const byGroup = new Map<string, Map<string, GroupTrajectory>>();
  samples.forEach((s, i) => {
    assertFinite(s.reward, 'reward', i);
    let group = byGroup.get(s.groupId);
    if (!group) byGroup.set(s.groupId, (group = new Map()));
    const traj = group.get(s.trajectoryId);
    if (!traj) {
      group.set(s.trajectoryId, { reward: s.reward, numSteps: 1 });
    } else if (traj.reward !== s.reward) {
      throw new InvalidArgumentError(
        `trajectory ${s.trajectoryId} has steps with different rewards (${traj.reward} and ${s.reward})`
      );
    } else {
      traj.numSteps += 1;
    }
  });

  const advantageOf = new Map<string, Map<string, number>>();
  const groups = new Map<string, GroupStatistics>();
  for (const [groupId, trajMap] of byGroup) {
    const ids = [...trajMap.keys()];
    const result = groupAdvantages([...trajMap.values()], opts);
    groups.set(groupId, result.stats);
    advantageOf.set(groupId, new Map(ids.map((id, k) => [id, result.advantages[k] ?? 0])));
  }

  const advantages = new Float64Array(samples.length);
  samples.forEach((s, i) => {
    advantages[i] = advantageOf.get(s.groupId)?.get(s.trajectoryId) ?? 0;
  });
  return { advantages, groups };
}

function resolveOptions(options: Partial<AdvantageOptions> | undefined): AdvantageOptions {
  const opts = withDefaults<AdvantageOptions>(DEFAULT_ADVANTAGE_OPTIONS, options);
  if (!(opts.epsilon >= 0) || !Number.isFinite(opts.epsilon)) {
    throw new InvalidArgumentError(`epsilon must be finite and ≥ 0, got ${opts.epsilon}`);
  }
  if (opts.statisticsOver !== 'steps' && opts.statisticsOver !== 'trajectories') {
    throw new InvalidArgumentError(
      `statisticsOver must be 'steps' or 'trajectories', got ${String(opts.statisticsOver)}`
    );
  }
  return opts;
}
