/**
 * DART's adaptive data curation rules (reference/dart-spec.md §3.4, §4.6–§4.8), as pure functions the
 * campaign workflow and the data activities share:
 *  - dynamic rollout number per task from its recent success rate (§4.6);
 *  - dynamic max steps per task from its successful trajectories (§4.7);
 *  - the hard-task flag (§4.8);
 *  - the staleness bound, per step sample by its policy version (§3.4, DESIGN.md);
 *  - trainable-group eligibility, experience-pool injection and down-sampling to 8 (§3.4 b–d).
 *
 * Reward conventions: a reward is "valid" when it is a finite number ≥ 0. DART marks broken runs with
 * −1 and dartflow records infrastructure failures as null; both are left out of every statistic here
 * (§3.4 a, §4.6). A success is reward > 0, a failure reward == 0 (§3.4 d).
 */
import { InvalidArgumentError, assertFinite, withDefaults } from './common';
import { shuffled, type Prng } from './prng';

/** null / negative rewards are not evidence (infra failure, DART's −1); NaN/Infinity are refused. */
function isValidReward(reward: number | null | undefined, field: string, index: number): reward is number {
  if (reward === null || reward === undefined) return false;
  assertFinite(reward, field, index);
  return reward >= 0;
}

// ---------------------------------------------------------------------------------------------------------
// §4.6 Dynamic rollout number

/**
 * Success rate over a task's latest `window` rollouts (newest first): mean of the valid rewards among
 * them. Invalid rows (null, < 0) are left out of both the numerator and the count. Reading of §4.6: the
 * window (n_prev, the n last assigned to the task) is taken first, then invalid rows are dropped.
 * Returns null when there is no valid reward in the window (DART then uses sr = 0 → n_max).
 */
export function recentSuccessRate(rewardsNewestFirst: readonly (number | null)[], window: number): number | null {
  if (!Number.isInteger(window) || window < 0)
    throw new InvalidArgumentError(`window must be an integer ≥ 0, got ${window}`);
  let sum = 0;
  let count = 0;
  rewardsNewestFirst.slice(0, window).forEach((r, i) => {
    if (isValidReward(r, 'reward', i)) {
      sum += r;
      count++;
    }
  });
  return count === 0 ? null : sum / count;
}

export interface DynamicRolloutOptions {
  /** Off → always nMax [§4.6: dynamic_rollout True in DART's dynamic config]. */
  enabled: boolean;
  /** Fewest rollouts [§4.6: min_rollout_n 1]. */
  nMin: number;
  /** Rollouts for a hard or unknown task [§4.6: rollout_n 8]. */
  nMax: number;
  /** θ: below it a task gets nMax [§4.6: success_rate_threshold 0.6]. */
  successRateThreshold: number;
  /** a in ⌊a/sr − b⌋ [§4.6: 9]. */
  numerator: number;
  /** b in ⌊a/sr − b⌋ [§4.6: 7]. */
  offset: number;
  /**
   * Added before flooring so a/sr − b that lands a hair under an integer through float round-off
   * (e.g. an sr of 0.9 computed as 0.9000000000000001) still gives that integer. dartflow's guard.
   */
  epsilon: number;
}

export const DEFAULT_DYNAMIC_ROLLOUT_OPTIONS: Readonly<DynamicRolloutOptions> = Object.freeze({
  enabled: true,
  nMin: 1,
  nMax: 8,
  successRateThreshold: 0.6,
  numerator: 9,
  offset: 7,
  epsilon: 1e-9,
});

/**
 * n(τ) = nMax if sr < θ, else max(nMin, ⌊9/sr − 7⌋) (§4.6), additionally capped at nMax (a no-op with
 * θ = 0.6, where ⌊9/0.6 − 7⌋ = 8; it keeps a lowered θ from asking for more than nMax).
 * A task with no history (sr null) gets nMax. Mapping with the defaults:
 * sr 0.6→8, 0.7→5, 0.75→5, 0.8→4, 0.9→3, 1.0→2.
 */
export function dynamicRolloutNumber(successRate: number | null, options?: Partial<DynamicRolloutOptions>): number {
  const o = withDefaults<DynamicRolloutOptions>(DEFAULT_DYNAMIC_ROLLOUT_OPTIONS, options);
  if (!Number.isInteger(o.nMin) || !Number.isInteger(o.nMax) || o.nMin < 1 || o.nMin > o.nMax) {
    throw new InvalidArgumentError(`need integers 1 ≤ nMin ≤ nMax, got ${o.nMin} and ${o.nMax}`);
  }
  if (successRate === null || !o.enabled) return o.nMax;
  assertFinite(successRate, 'successRate');
  // Rewards above 1 (a non-binary evaluator) simply push n towards nMin; a negative rate is a caller bug.
  if (successRate < 0) throw new InvalidArgumentError(`successRate must be ≥ 0, got ${successRate}`);
  if (successRate < o.successRateThreshold || successRate === 0) return o.nMax;
  const n = Math.floor(o.numerator / successRate - o.offset + o.epsilon);
  return Math.min(o.nMax, Math.max(o.nMin, n));
}

// ---------------------------------------------------------------------------------------------------------
// Solved tasks take fewer turns (dartflow's extension, not in DART)

/**
 * A task is solved when each of its last `window` valid training rewards is a success (reward ≥ 1 for the
 * 0/1 success indicators the campaign keeps). Fewer than `window` valid rewards is not enough evidence.
 */
export function isSolvedTask(rewardsNewestLast: readonly (number | null)[], window: number): boolean {
  if (!Number.isInteger(window) || window < 1)
    throw new InvalidArgumentError(`window must be an integer ≥ 1, got ${window}`);
  const valid = rewardsNewestLast.filter((r, i): r is number => isValidReward(r, 'reward', i));
  return valid.length >= window && valid.slice(-window).every((r) => r >= 1);
}

/**
 * Whether a task takes its round-robin turn. DART gives every task a turn; even at 100 % success §4.6 still
 * asks for n = 2 rollouts, whose equal rewards carry no GRPO signal and are skipped by the trainer. With
 * `every` = k > 1 a solved task takes one turn in k (`turnsPassed` = its turns passed up since it last
 * took one), so those episodes go to tasks that still teach something. `every` = 1 is DART's rule.
 * A solved task keeps being sampled (it is never dropped): a regression shows in its rewards and turns it
 * back into an unsolved task, which takes every turn again.
 */
export function takesTurn(solved: boolean, turnsPassed: number, every: number): boolean {
  if (!Number.isInteger(every) || every < 1)
    throw new InvalidArgumentError(`every must be an integer ≥ 1, got ${every}`);
  return !solved || turnsPassed + 1 >= every;
}

// ---------------------------------------------------------------------------------------------------------
// Rewards discounted by trajectory length (dartflow's extension, not in DART; curation.stepDiscount)

/**
 * γ^(numSteps − 1): a success in one step keeps its reward, each further step costs a factor γ. DART's
 * reward ignores length, so a policy that first presses a key that changes nothing and then clicks
 * scores as well as one that clicks at once; sampled rollouts stay at ≈ 100 % while the greedy policy
 * repeats the no-op until its step budget ends. Repeated multiplication: replayed by the workflow, the
 * result must be bit-identical everywhere.
 */
export function stepDiscountFactor(gamma: number, numSteps: number): number {
  assertFinite(gamma, 'gamma');
  if (!(gamma > 0 && gamma <= 1)) throw new InvalidArgumentError(`gamma must be in (0, 1], got ${gamma}`);
  if (!Number.isInteger(numSteps) || numSteps < 0)
    throw new InvalidArgumentError(`numSteps must be an integer ≥ 0, got ${numSteps}`);
  let factor = 1;
  for (let i = 1; i < numSteps; i++) factor *= gamma;
  return factor;
}

// ---------------------------------------------------------------------------------------------------------
// Signal-weighted task turns (dartflow's extension, not in DART; rollout.taskTurns 'signal')

/**
 * How likely a task's next group is to teach GRPO something, from whether its recent groups did (1: the
 * group passed curation — rewards that differ, or an all-failed group rescued by a pooled success; 0: it
 * was skipped, e.g. every reward a success). Counted per group, not estimated from episode rewards: the n
 * episodes of a group share one seed, so their outcomes are not independent, and the 16 rewards a task keeps
 * are only two groups (a first version that did so left click-target's share of groups at 26–34 %).
 *
 * Jeffreys' estimate (taught + ½) / (groups + 1): an untried task gets ½, and a task none of whose last 16
 * groups taught keeps 0.5 / 17 ≈ 0.03 — it is still sampled, so a regression shows in its groups and its
 * weight climbs back (one taught group in 16 triples it).
 */
export function groupTeachRate(taughtNewestLast: readonly number[]): number {
  let taught = 0;
  taughtNewestLast.forEach((t, i) => {
    if (t !== 0 && t !== 1) throw new InvalidArgumentError(`taught[${i}] must be 0 or 1, got ${t}`);
    taught += t;
  });
  return (taught + 0.5) / (taughtNewestLast.length + 1);
}

/**
 * One pick of smooth weighted round robin: every candidate's credit grows by its weight, the largest
 * credit wins (ties: the earliest candidate) and pays the sum of the weights. Over any window each
 * candidate's share of picks tracks weight / Σ weights and the picks stay interleaved; with equal weights it
 * is plain round robin. Credits are carried by the caller (they sum to 0 while the candidates stay the
 * same). Returns the winner's index and the new credits; the inputs are not changed.
 */
export function weightedTurn(
  credits: readonly number[],
  weights: readonly number[]
): { pick: number; credits: number[] } {
  if (credits.length !== weights.length || weights.length === 0)
    throw new InvalidArgumentError(
      `credits (${credits.length}) and weights (${weights.length}) must have the same, non-zero length`
    );
  weights.forEach((w, i) => {
    assertFinite(w, 'weight', i);
    if (w < 0) throw new InvalidArgumentError(`weight ${i} must be ≥ 0, got ${w}`);
  });
  const next = credits.map((c, i) => c + weights[i]!);
  let pick = 0;
  for (let i = 1; i < next.length; i++) if (next[i]! > next[pick]!) pick = i;
  next[pick]! -= weights.reduce((a, b) => a + b, 0);
  return { pick, credits: next };
}

// ---------------------------------------------------------------------------------------------------------
// §4.7 Dynamic trajectory length

export interface DynamicMaxStepsOptions {
  /** Off → always maxSteps. */
  enabled: boolean;
  /** Global step budget: the fallback and the cap [§2.5 / §6.1: 30]. */
  maxSteps: number;
  /** Steps added to the longest success [§4.7: unknown in DART, 0]. */
  margin: number;
  /** Never budget fewer steps than this [§4.7: unknown in DART, 1]. */
  minSteps: number;
}

export const DEFAULT_DYNAMIC_MAX_STEPS_OPTIONS: Readonly<DynamicMaxStepsOptions> = Object.freeze({
  enabled: true,
  maxSteps: 30,
  margin: 0,
  minSteps: 1,
});

export interface EpisodeOutcome {
  reward: number | null;
  numSteps: number;
}

/**
 * Per-task step budget: the longest successful trajectory seen so far (+ margin), within
 * [minSteps, maxSteps]; the global maxSteps when the task has no success yet (§4.7, INFERRED rule).
 */
export function dynamicMaxSteps(history: readonly EpisodeOutcome[], options?: Partial<DynamicMaxStepsOptions>): number {
  const o = withDefaults<DynamicMaxStepsOptions>(DEFAULT_DYNAMIC_MAX_STEPS_OPTIONS, options);
  for (const [field, value] of [
    ['maxSteps', o.maxSteps],
    ['minSteps', o.minSteps],
    ['margin', o.margin],
  ] as const) {
    if (!Number.isInteger(value) || value < 0)
      throw new InvalidArgumentError(`${field} must be an integer ≥ 0, got ${value}`);
  }
  if (o.minSteps > o.maxSteps || o.maxSteps < 1)
    throw new InvalidArgumentError(`need 1 ≤ maxSteps and minSteps ≤ maxSteps`);
  if (!o.enabled) return o.maxSteps;
  let longest = -1;
  history.forEach((e, i) => {
    if (isValidReward(e.reward, 'reward', i) && e.reward > 0) {
      if (!Number.isInteger(e.numSteps) || e.numSteps < 0) {
        throw new InvalidArgumentError(`numSteps[${i}] must be an integer ≥ 0, got ${e.numSteps}`);
      }
      longest = Math.max(longest, e.numSteps);
    }
  });
  if (longest < 0) return o.maxSteps;
  return Math.min(o.maxSteps, Math.max(o.minSteps, longest + o.margin));
}

// ---------------------------------------------------------------------------------------------------------
// §4.8 Hard tasks

export interface HardTaskOptions {
  /** A task is hard when its success rate is at most this [§4.8: 0, every rollout failed]. */
  maxSuccessRate: number;
  /** …over at least this many valid rollouts (no evidence → not flagged) [§4.8: one group; dartflow 1]. */
  minRollouts: number;
}

export const DEFAULT_HARD_TASK_OPTIONS: Readonly<HardTaskOptions> = Object.freeze({
  maxSuccessRate: 0,
  minRollouts: 1,
});

/** DART's operational definition (§4.8): every recent rollout of the task failed. */
export function isHardTask(recentRewards: readonly (number | null)[], options?: Partial<HardTaskOptions>): boolean {
  const o = withDefaults<HardTaskOptions>(DEFAULT_HARD_TASK_OPTIONS, options);
  let count = 0;
  let sum = 0;
  recentRewards.forEach((r, i) => {
    if (isValidReward(r, 'reward', i)) {
      count++;
      sum += r > 0 ? 1 : 0;
    }
  });
  return count >= Math.max(1, o.minRollouts) && sum / count <= o.maxSuccessRate;
}

// ---------------------------------------------------------------------------------------------------------
// §3.4 Staleness bound

/**
 * A step sampled by policy version `stepVersion` may train version `trainVersion` only if
 * trainVersion − maxStaleness ≤ stepVersion ≤ trainVersion. maxStaleness = 1 is DART's top-2-versions
 * window (§3.4). A step from a version newer than the one being trained cannot come from this lineage
 * (e.g. a rolled-back checkpoint) and is refused.
 */
export function stepIsFresh(stepVersion: number, trainVersion: number, maxStaleness: number): boolean {
  if (!Number.isInteger(maxStaleness) || maxStaleness < 0) {
    throw new InvalidArgumentError(`maxStaleness must be an integer ≥ 0, got ${maxStaleness}`);
  }
  return stepVersion <= trainVersion && trainVersion - stepVersion <= maxStaleness;
}

/** Per step sample: 1 when its version passes the staleness bound (dartflow bounds every step, §3.4). */
export function freshStepMask(stepVersions: readonly number[], trainVersion: number, maxStaleness: number): Uint8Array {
  return Uint8Array.from(stepVersions, (v) => (stepIsFresh(v, trainVersion, maxStaleness) ? 1 : 0));
}

export type Freshness = 'fresh' | 'partial' | 'stale';

/**
 * Whole-trajectory view from its version range: 'fresh' (every step passes), 'partial' (some do: train
 * only those steps), 'stale' (none: drop it from the buffer). DART itself only checks the last step.
 */
export function trajectoryFreshness(
  versions: { minPolicyVersion: number; maxPolicyVersion: number },
  trainVersion: number,
  maxStaleness: number
): Freshness {
  const minOk = stepIsFresh(versions.minPolicyVersion, trainVersion, maxStaleness);
  const maxOk = stepIsFresh(versions.maxPolicyVersion, trainVersion, maxStaleness);
  if (minOk && maxOk) return 'fresh';
  // Versions are integers in [min, max]; some lie inside [v − s, v] iff the ranges overlap.
  const overlaps =
    versions.maxPolicyVersion >= trainVersion - maxStaleness && versions.minPolicyVersion <= trainVersion;
  return overlaps ? 'partial' : 'stale';
}

// ---------------------------------------------------------------------------------------------------------
// §3.4 b–d Trainable groups

/** What the group rules need from a trajectory. */
export interface CandidateTrajectory {
  trajectoryId: string;
  /** null (infra failure) or < 0 (DART's −1): dropped before any rule (§3.4 a). */
  reward: number | null;
  /** Creation time (ms); "oldest" and "most recent" in §3.4 c. */
  createdAt: number;
}

export interface GroupRuleOptions {
  /** Groups with mean reward ≥ accMax carry no signal (all success) [§3.4 b: acc_max 1.0]. */
  accMax: number;
  /** Fewest valid trajectories for a trainable group [§3.4 b: per_task_limit = rollout_n 8]. */
  perTaskLimit: number;
  /** Trajectories kept per trained group [§3.4 d: 8]. */
  groupSize: number;
  /** Inject a pooled success into an all-failed group [§4.8: on]. */
  experiencePool: boolean;
  /**
   * Skip a group whose valid rewards are all equal and positive (zero advantage, nothing to learn). DART
   * needs no such rule: its 0/1 rewards are equal and positive only at mean 1 = accMax. Rewards discounted
   * by trajectory length (curation.stepDiscount) make them possible: all successes in the same number of
   * steps > 1. Off by default.
   */
  skipEqualRewards: boolean;
}

export const DEFAULT_GROUP_RULE_OPTIONS: Readonly<GroupRuleOptions> = Object.freeze({
  accMax: 1.0,
  perTaskLimit: 8,
  groupSize: 8,
  experiencePool: true,
  skipEqualRewards: false,
});

export interface GroupEligibility {
  eligible: boolean;
  reason: 'ok' | 'too-few' | 'mean-out-of-range';
  /** Valid trajectories counted. */
  count: number;
  /** Mean valid reward (0 for an empty group). */
  mean: number;
}

/** §3.4 b: eligible iff count ≥ perTaskLimit and 0 ≤ mean < accMax, over valid rewards. */
export function groupEligibility(
  rewards: readonly (number | null)[],
  options?: Partial<Pick<GroupRuleOptions, 'accMax' | 'perTaskLimit'>>
): GroupEligibility {
  const o = withDefaults(DEFAULT_GROUP_RULE_OPTIONS, options);
  let count = 0;
  let sum = 0;
  rewards.forEach((r, i) => {
    if (isValidReward(r, 'reward', i)) {
      count++;
      sum += r;
    }
  });
  const mean = count === 0 ? 0 : sum / count;
  if (count < o.perTaskLimit) return { eligible: false, reason: 'too-few', count, mean };
  if (!(mean >= 0 && mean < o.accMax)) return { eligible: false, reason: 'mean-out-of-range', count, mean };
  return { eligible: true, reason: 'ok', count, mean };
}

export type InjectionResult<T> =
  | { kind: 'unchanged'; group: T[] }
  | { kind: 'injected'; group: T[]; injected: T; replaced: T }
  | { kind: 'no-pooled-success'; group: T[] };

/**
 * §3.4 c / §4.8: if every trajectory of the group failed, replace its oldest trajectory with the most
 * recent successful one from the pool (the task's successes from any version, used or not), so the
 * group carries a positive signal. The group keeps its size. A group with any success is unchanged.
 * Ties on createdAt resolve to the earlier array position, so the result is deterministic.
 */
export function injectPooledSuccess<T extends CandidateTrajectory>(
  group: readonly T[],
  pool: readonly T[]
): InjectionResult<T> {
  const valid = group.filter((t, i) => isValidReward(t.reward, 'reward', i));
  if (valid.length === 0 || valid.some((t) => (t.reward as number) > 0)) return { kind: 'unchanged', group: valid };

  const inGroup = new Set(valid.map((t) => t.trajectoryId));
  let best: T | undefined;
  pool.forEach((p, i) => {
    if (!isValidReward(p.reward, 'pool reward', i) || p.reward <= 0 || inGroup.has(p.trajectoryId)) return;
    if (best === undefined || p.createdAt > best.createdAt) best = p;
  });
  if (best === undefined) return { kind: 'no-pooled-success', group: valid };

  let oldestIndex = 0;
  valid.forEach((t, i) => {
    if (t.createdAt < (valid[oldestIndex] as T).createdAt) oldestIndex = i;
  });
  const replaced = valid[oldestIndex] as T;
  const out = valid.slice();
  out[oldestIndex] = best;
  return { kind: 'injected', group: out, injected: best, replaced };
}

/**
 * §3.4 d: keep `size` trajectories chosen at random, including at least one success (reward > 0) and one
 * failure (reward == 0) when the group has both. Output keeps the input order. Deterministic given rng.
 */
export function downsampleGroup<T extends CandidateTrajectory>(group: readonly T[], size: number, rng: Prng): T[] {
  if (!Number.isInteger(size) || size < 1)
    throw new InvalidArgumentError(`size must be a positive integer, got ${size}`);
  if (group.length <= size) return group.slice();
  const positives: number[] = [];
  const negatives: number[] = [];
  group.forEach((t, i) => ((t.reward ?? 0) > 0 ? positives : negatives).push(i));

  const chosen = new Set<number>();
  if (size >= 2 && positives.length > 0 && negatives.length > 0) {
    chosen.add(positives[rng.nextInt(positives.length)] as number);
    chosen.add(negatives[rng.nextInt(negatives.length)] as number);
  }
  const rest = shuffled(
    group.map((_, i) => i).filter((i) => !chosen.has(i)),
    rng
  );
  for (const i of rest) {
    if (chosen.size >= size) break;
    chosen.add(i);
  }
  return group.filter((_, i) => chosen.has(i));
}

export type CurateGroupResult<T> =
  | { kind: 'train'; trajectories: T[]; injected: T | null }
  | { kind: 'skip'; reason: 'too-few' | 'mean-out-of-range' | 'no-signal'; count: number; mean: number };

/**
 * The whole §3.4 b–d pipeline for one task's candidate group: eligibility → pool injection for an
 * all-failed group (or skip it: zero advantage, no signal) → down-sampling to groupSize.
 */
export function curateGroup<T extends CandidateTrajectory>(
  group: readonly T[],
  pool: readonly T[],
  rng: Prng,
  options?: Partial<GroupRuleOptions>
): CurateGroupResult<T> {
  const o = withDefaults<GroupRuleOptions>(DEFAULT_GROUP_RULE_OPTIONS, options);
  const eligibility = groupEligibility(
    group.map((t) => t.reward),
    o
  );
  if (!eligibility.eligible) {
    return {
      kind: 'skip',
      reason: eligibility.reason === 'too-few' ? 'too-few' : 'mean-out-of-range',
      count: eligibility.count,
      mean: eligibility.mean,
    };
  }
  let trajectories = group.filter((t, i) => isValidReward(t.reward, 'reward', i));
  if (o.skipEqualRewards && eligibility.mean > 0 && trajectories.every((t) => t.reward === trajectories[0]!.reward))
    return { kind: 'skip', reason: 'no-signal', count: eligibility.count, mean: eligibility.mean };
  let injected: T | null = null;
  if (eligibility.mean === 0) {
    const injection = o.experiencePool ? injectPooledSuccess(trajectories, pool) : null;
    if (injection?.kind !== 'injected') {
      // DART drops the task (§3.4 c): all rewards equal → zero advantage → nothing to learn.
      return { kind: 'skip', reason: 'no-signal', count: eligibility.count, mean: eligibility.mean };
    }
    trajectories = injection.group;
    injected = injection.injected;
  }
  trajectories = downsampleGroup(trajectories, o.groupSize, rng);
  // The injected success must survive down-sampling: it is the group's only positive, and
  // downsampleGroup keeps ≥ 1 positive whenever both kinds exist.
  return { kind: 'train', trajectories, injected };
}
