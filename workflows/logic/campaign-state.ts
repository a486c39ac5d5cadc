/**
 * The campaign's state and its transitions, as pure functions (no Temporal, no I/O) so the workflow stays
 * a thin loop and the rules are unit-tested directly. The state is what continue-as-new carries.
 */
import { architectureOptionsOn, type ArchitectureOption } from '../../policy/architecture-options';
import {
  createPrng,
  curateGroup,
  dynamicMaxSteps,
  dynamicRolloutNumber,
  groupTeachRate,
  hashSeed,
  isHardTask,
  isSolvedTask,
  recentSuccessRate,
  stepDiscountFactor,
  takesTurn,
  weightedTurn,
  type CandidateTrajectory,
} from '../../algorithms';
import type { TrainGroupRef } from '../../activities/trainer/types';
import { isSuccess } from '../../algorithms/success';
import { keys } from '../../storage/keys';
import { addVersion, ancestry, isFreshFor, pruneLineage, rollbackTarget, ROOT_PARENT, type Lineage } from './lineage';
import type { CampaignConfig } from '../../schemas/config';
import type {
  CampaignPhase,
  CampaignStatus,
  EvalPoint,
  GroupSummary,
  PolicyEndpoint,
  TaskStats,
} from '../../schemas/campaign';

/**
 * How many recent rewards a task keeps: the rollout-number rule reads the last n_prev ≤ nMax rewards and
 * the status the last 16, so 16 suffices (bounds the carried state: 369 OSWorld tasks × 16 numbers).
 */
export const STATS_WINDOW = 16;
/** Groups per task whose curation verdict signal-weighted turns remember (rollout.taskTurns 'signal'). */
export const GROUP_STATS_WINDOW = 16;
/** Evaluation points kept in the workflow (all of them are also in MinIO via the curve activity). */
export const EVALS_KEPT = 50;
/**
 * Most groups the buffer holds: a train step takes at most maxGroups, so more than a few steps' worth
 * can only go stale. The oldest are dropped first (recorded as discards 'buffer-full').
 */
export const bufferCapacity = (c: CampaignConfig): number => 4 * c.trainer.maxGroups;

export interface TaskRef {
  id: string;
  family: string;
  /** The task spec inline (small; passed to env activities). */
  spec: { id: string } & Record<string, unknown>;
  trainSeeds: { from: number; to: number };
  maxSteps: number;
}

export interface InFlightGroup {
  groupId: string;
  taskId: string;
  n: number;
  startedAtMs: number;
  /** The run (runIndex) that started it: children of earlier runs are reconciled by describing them. */
  run: number;
}

/**
 * A finished group waiting for a train step: the compact form of its GroupSummary (ids, rewards,
 * versions). A trajectory's manifest key is derived from the campaign and trajectory id unless it lives
 * elsewhere (an injected success), then it is kept.
 */
export interface BufferedTrajectory {
  trajectoryId: string;
  reward: number;
  numSteps: number;
  minPolicyVersion: number;
  maxPolicyVersion: number;
  injectedFromPool: boolean;
  manifestKey?: string;
}
export interface BufferedGroup {
  groupId: string;
  taskId: string;
  trajectories: BufferedTrajectory[];
}

/** A child workflow the campaign waits for (train step, model rollout, evaluation). */
export interface ChildRef {
  workflowId: string;
  startedAtMs: number;
  run: number;
}
export interface TrainChild extends ChildRef {
  trainStep: number;
  fromVersion: number;
  /** What the step took (discard records if it fails for good). */
  groups: Array<{ groupId: string; taskId: string; trajectoryIds: string[] }>;
}
export interface RolloutChild extends ChildRef {
  version: number;
}
export interface EvalChild extends ChildRef {
  version: number;
}

export interface CampaignState {
  /** Carried across continue-as-new; validated and migrated by workflows/logic/state-schema.ts. */
  schemaVersion: 2;
  campaignId: string;
  config: CampaignConfig;
  tasks: TaskRef[];
  heldOut: TaskRef[];
  phase: CampaignPhase;
  paused: boolean;
  stopRequested: boolean;
  startedAtMs: number;
  runIndex: number;
  cursor: number;
  groupSeq: number;
  stats: Record<string, TaskStats>;
  /** Finished groups waiting for a train step, oldest first (bounded by bufferCapacity). */
  buffer: BufferedGroup[];
  inFlight: Record<string, InFlightGroup>;
  /** The version the next train step starts from (the head of the lineage being trained). */
  policyVersion: number;
  /** Reference policy of the KL term: v0, or the behaviour-cloned warm start (DART: the SFT model). */
  referenceVersion: number;
  /** version → parent (staleness is measured along it; abandoned branches are never trained). */
  lineage: Lineage;
  /** serverId → version it serves (live servers only). */
  servedVersions: Record<string, number>;
  /** Live policy servers (refreshed from the registry while the campaign runs). */
  endpoints: PolicyEndpoint[];
  pinnedVersion: number | null;
  /** Children in flight: at most one train step, one model rollout and one evaluation at a time. */
  train: TrainChild | null;
  rollout: RolloutChild | null;
  evaluation: EvalChild | null;
  /** A trained version waiting for the model rollout in flight to finish (newest wins). */
  pendingRollout: number | null;
  /** Model rollouts that finished ok since the last evaluation started. */
  rolloutsSinceEval: number;
  trainSteps: number;
  episodes: number;
  infraFailures: number;
  staleDropped: number;
  /** Model rollouts that were rolled back (failed load or canary gate). */
  rolledBack: number;
  /** Trained versions that were abandoned (refused by a gate, or their parent was). */
  abandonedVersions: number;
  evals: EvalPoint[];
  lastEvalVersion: number;
  /** Trajectories consumed by train steps (each at most once). */
  consumedCount: number;
}

export function emptyTaskStats(taskId: string): TaskStats {
  return {
    taskId,
    recentRewards: [],
    episodes: 0,
    successes: 0,
    lastN: 0,
    longestSuccess: 0,
    hard: false,
    quarantined: false,
    poolSize: 0,
  };
}

export function initialCampaignState(args: {
  campaignId: string;
  config: CampaignConfig;
  tasks: TaskRef[];
  heldOut: TaskRef[];
  startedAtMs: number;
  initialVersion: number;
}): CampaignState {
  return {
    schemaVersion: 2,
    campaignId: args.campaignId,
    config: args.config,
    tasks: args.tasks,
    heldOut: args.heldOut,
    phase: 'starting',
    paused: false,
    stopRequested: false,
    startedAtMs: args.startedAtMs,
    runIndex: 0,
    cursor: 0,
    groupSeq: 0,
    stats: Object.fromEntries(args.tasks.map((t) => [t.id, emptyTaskStats(t.id)])),
    buffer: [],
    inFlight: {},
    policyVersion: args.initialVersion,
    referenceVersion: args.initialVersion,
    lineage: { [String(args.initialVersion)]: ROOT_PARENT },
    servedVersions: {},
    endpoints: [],
    pinnedVersion: null,
    train: null,
    rollout: null,
    evaluation: null,
    pendingRollout: null,
    rolloutsSinceEval: 0,
    trainSteps: 0,
    episodes: 0,
    infraFailures: 0,
    staleDropped: 0,
    rolledBack: 0,
    abandonedVersions: 0,
    evals: [],
    lastEvalVersion: -1,
    consumedCount: 0,
  };
}

export interface GroupPlan {
  groupId: string;
  task: TaskRef;
  seed: number;
  n: number;
  maxSteps: number;
  poolWanted: number;
  /** Solved tasks whose round-robin turn this plan passed over (rollout.solvedTaskEvery > 1). */
  passedOver: string[];
  /** rollout.taskTurns 'signal': every active task's turn credit once this plan starts (markGroupStarted). */
  turnCredits?: Record<string, number>;
}

export const episodesInFlight = (s: CampaignState): number => Object.values(s.inFlight).reduce((a, g) => a + g.n, 0);

/** A success: reward ≥ campaign.successThreshold (algorithms/success.ts; the raw reward stays recorded). */
export const isSuccessReward = (s: Pick<CampaignState, 'config'>, reward: number | null): boolean =>
  isSuccess(reward, s.config.campaign.successThreshold);

/**
 * DART §4.6/§4.7 for one task: rollout count from its recent success rate; step budget from the longest
 * success ever seen (DART: "the historical maximum of successful trajectories") plus the margin. A task
 * whose recent episodes all failed gets the full budget again, so a budget set by an early short success
 * can grow back when the task needs longer (a window-based budget could only shrink).
 */
export function rolloutPlanFor(s: CampaignState, task: TaskRef): { n: number; maxSteps: number } {
  const st = s.stats[task.id] ?? emptyTaskStats(task.id);
  const r = s.config.rollout;
  const newestFirst = [...st.recentRewards].reverse();
  const sr = recentSuccessRate(newestFirst, st.lastN > 0 ? st.lastN : r.nMax);
  const n = dynamicRolloutNumber(sr, {
    enabled: r.dynamicRollout,
    nMin: r.nMin,
    nMax: r.nMax,
    successRateThreshold: r.successRateThreshold,
  });
  const cap = Math.min(r.maxSteps, task.maxSteps);
  const struggling = st.recentRewards.length > 0 && sr === 0;
  const maxSteps = dynamicMaxSteps(
    st.longestSuccess > 0 && !struggling ? [{ reward: 1, numSteps: st.longestSuccess }] : [],
    { enabled: r.dynamicMaxSteps, maxSteps: cap, margin: r.maxStepsMargin, minSteps: 1 }
  );
  // A group needs ≥ 2 episodes for a non-zero GRPO advantage.
  return { n: Math.max(2, n), maxSteps };
}

/**
 * The next task group to start, round-robin over non-quarantined tasks, or null when env capacity is
 * full (rollout-wise: called whenever a group ends, so capacity never idles waiting for a batch).
 */
export function planNextGroup(s: CampaignState): GroupPlan | null {
  const active = s.tasks.filter((t) => !s.stats[t.id]?.quarantined);
  if (active.length === 0) return null;
  const { task, passedOver, turnCredits } =
    s.config.rollout.taskTurns === 'signal' ? signalWeightedTurn(s, active) : nextTurn(s, active);
  const { n, maxSteps } = rolloutPlanFor(s, task);
  const inFlight = episodesInFlight(s);
  // Always allow one group when idle, even if n exceeds the configured concurrency.
  if (inFlight > 0 && inFlight + n > s.config.rollout.envConcurrency) return null;
  const groupId = `${s.campaignId}-g${String(s.groupSeq).padStart(6, '0')}`;
  const rng = createPrng(hashSeed(groupId));
  const span = task.trainSeeds.to - task.trainSeeds.from;
  const seed = task.trainSeeds.from + rng.nextInt(Math.max(1, Math.min(span, 2 ** 31 - 1)));
  // DART's pool lookup takes the most recent success of a task: every group offers its successes and the
  // pool keeps the newest k per task (activities/data/campaign-data.ts addToPool).
  const poolWanted = s.config.curation.experiencePool ? s.config.curation.precollectSuccessesPerTask : 0;
  return { groupId, task, seed, n, maxSteps, poolWanted, passedOver, ...(turnCredits ? { turnCredits } : {}) };
}

/**
 * How task groups use the experience pool beyond DART's per-task rule: with curation.poolKey 'instruction',
 * keyed by (task, instruction) under a per-task cap (TaskGroupInput.poolByInstruction); nothing otherwise,
 * so groups of per-task campaigns keep their recorded inputs.
 */
export function groupPoolOptions(c: Pick<CampaignConfig, 'curation'>): { poolByInstruction?: { maxPerTask: number } } {
  return c.curation.poolKey === 'instruction' ? { poolByInstruction: { maxPerTask: c.curation.poolMaxPerTask } } : {};
}

/**
 * The task whose round-robin turn it is. A solved task (its last rollout.solvedTaskWindow rewards all
 * successes) takes one turn in rollout.solvedTaskEvery (algorithms/curation.ts takesTurn) and the turn
 * goes on to the next task; when every task passes, the last one looked at takes the turn.
 */
/** Whose turn it is, and what the choice changes in the carried state once the group starts. */
type Turn = Pick<GroupPlan, 'task' | 'passedOver' | 'turnCredits'>;

function nextTurn(s: CampaignState, active: TaskRef[]): Turn {
  const { solvedTaskEvery: every, solvedTaskWindow: window } = s.config.rollout;
  const passedOver: string[] = [];
  for (let i = 0; ; i++) {
    const task = active[(s.cursor + i) % active.length]!;
    const st = s.stats[task.id];
    const solved =
      every > 1 &&
      st !== undefined &&
      isSolvedTask(
        st.recentRewards.map((r) => (isSuccessReward(s, r) ? 1 : 0)),
        window
      );
    if (i + 1 >= active.length || takesTurn(solved, st?.turnsPassed ?? 0, every)) return { task, passedOver };
    passedOver.push(task.id);
  }
}

/**
 * rollout.taskTurns 'signal': smooth weighted round robin over each active task's rate of recent groups
 * that taught (passed curation; algorithms/curation.ts groupTeachRate), so episodes go where a group is
 * least likely to be skipped. Candidates are taken from the round-robin cursor on, so equal weights (every
 * task untried) give the round-robin order.
 */
function signalWeightedTurn(s: CampaignState, active: TaskRef[]): Turn {
  const order = active.map((_, i) => active[(s.cursor + i) % active.length]!);
  const turn = weightedTurn(
    order.map((t) => s.stats[t.id]?.turnCredit ?? 0),
    order.map((t) => groupTeachRate(s.stats[t.id]?.recentGroupsTaught ?? []))
  );
  return {
    task: order[turn.pick]!,
    passedOver: [],
    turnCredits: Object.fromEntries(order.map((t, i) => [t.id, turn.credits[i]!])),
  };
}

export function markGroupStarted(s: CampaignState, plan: GroupPlan, nowMs: number): void {
  s.inFlight[plan.groupId] = {
    groupId: plan.groupId,
    taskId: plan.task.id,
    n: plan.n,
    startedAtMs: nowMs,
    run: s.runIndex,
  };
  s.cursor += 1 + plan.passedOver.length;
  s.groupSeq++;
  for (const id of plan.passedOver) {
    const passed = s.stats[id];
    if (passed) passed.turnsPassed = (passed.turnsPassed ?? 0) + 1;
  }
  for (const [id, credit] of Object.entries(plan.turnCredits ?? {})) {
    const credited = s.stats[id];
    if (credited) credited.turnCredit = credit;
  }
  const st = s.stats[plan.task.id];
  if (st) st.lastN = plan.n;
  // Absent (not 0) when the task took its turn: the carried state of DART's rule (every = 1) is unchanged.
  if (st?.turnsPassed !== undefined) delete st.turnsPassed;
}

/** The buffered (compact) form of a group summary: what the train-batch selection needs, nothing more. */
export function toBufferedGroup(campaignId: string, g: GroupSummary): BufferedGroup {
  return {
    groupId: g.groupId,
    taskId: g.taskId,
    trajectories: g.trajectories
      .filter((t) => t.reward !== null)
      .map((t) => ({
        trajectoryId: t.trajectoryId,
        reward: t.reward ?? 0,
        numSteps: t.numSteps,
        minPolicyVersion: t.minPolicyVersion,
        maxPolicyVersion: t.maxPolicyVersion,
        injectedFromPool: t.injectedFromPool,
        ...(t.manifestKey !== keys.trajectoryManifest(campaignId, t.trajectoryId)
          ? { manifestKey: t.manifestKey }
          : {}),
      })),
  };
}

export const manifestKeyOf = (campaignId: string, t: BufferedTrajectory): string =>
  t.manifestKey ?? keys.trajectoryManifest(campaignId, t.trajectoryId);

/** A reward as the curation rules and task statistics read it (CurationMode): 1 success, 0 failure. */
const successIndicator = (s: Pick<CampaignState, 'config'>, reward: number): number =>
  isSuccessReward(s, reward) ? 1 : 0;

/**
 * A finished group: update task statistics and buffer it for training. Duplicate or unknown reports
 * (a retried signal, a child result that arrives after its signal) are ignored. The task's recent rewards
 * (dynamic rollout count, hard-task test) are success indicators under `mode.successRewards` (default; see
 * CurationMode): MiniWoB's −1 failures were otherwise left out as DART's "broken run" −1, so a task's
 * success rate counted its successes only and every task that ever succeeded got the fewest rollouts.
 */
export function recordGroup(s: CampaignState, g: GroupSummary, poolAdded: number, mode: CurationMode = {}): boolean {
  const successRewards = mode.successRewards ?? true;
  if (!s.inFlight[g.groupId]) return false;
  delete s.inFlight[g.groupId];
  s.infraFailures += g.infraFailures;
  const st = s.stats[g.taskId] ?? (s.stats[g.taskId] = emptyTaskStats(g.taskId));
  for (const t of g.trajectories) {
    if (t.injectedFromPool || t.reward === null) continue;
    s.episodes++;
    st.episodes++;
    if (isSuccessReward(s, t.reward)) {
      st.successes++;
      st.longestSuccess = Math.max(st.longestSuccess, t.numSteps);
    }
    st.recentRewards.push(successRewards ? successIndicator(s, t.reward) : t.reward);
  }
  st.recentRewards.splice(0, Math.max(0, st.recentRewards.length - STATS_WINDOW));
  st.poolSize = Math.min(s.config.curation.precollectSuccessesPerTask, st.poolSize + poolAdded);
  st.hard = isHardTask([...st.recentRewards].reverse().slice(0, Math.max(st.lastN, 1)));
  if (g.trajectories.some((t) => t.reward !== null)) {
    const buffered = toBufferedGroup(s.campaignId, g);
    s.buffer.push(buffered);
    // Only signal-weighted turns read it: other campaigns' carried state stays as it was.
    if (s.config.rollout.taskTurns === 'signal') noteGroupVerdict(s, st, buffered, mode);
  }
  return true;
}

/** rollout.taskTurns 'signal': remember whether the task's newest group passed curation (1) or not (0). */
function noteGroupVerdict(s: CampaignState, st: TaskStats, g: BufferedGroup, mode: CurationMode): void {
  const verdict = curateBuffered(s, g, mode);
  // A group too stale to train says how slow it was, not what the task can teach: not counted.
  if (verdict.kind === 'skip' && verdict.reason.startsWith('stale')) return;
  const taught = st.recentGroupsTaught ?? (st.recentGroupsTaught = []);
  taught.push(verdict.kind === 'train' ? 1 : 0);
  taught.splice(0, Math.max(0, taught.length - GROUP_STATS_WINDOW));
}

/** A group that will never report (its child failed, was terminated or timed out): its episodes are lost. */
export function recordGroupLost(s: CampaignState, groupId: string): InFlightGroup | null {
  const g = s.inFlight[groupId];
  if (!g) return null;
  delete s.inFlight[groupId];
  s.infraFailures += g.n;
  return g;
}

/**
 * Drops buffered groups beyond bufferCapacity; returns them (for discard records). Groups that no train
 * step could use now go first (DART's curation skips them: every reward equal with no pooled success to
 * inject, success rate above accMax, too few fresh episodes), oldest first; only then the oldest trainable
 * ones. Oldest-first alone let the groups of saturated tasks (all successes) fill the buffer and push out
 * the few with signal before minGroups of them were ever buffered together: measured on MiniWoB's 11 easy
 * tasks, 11,000 rollout episodes gave 20 train steps while the trainer sat idle.
 */
export function trimBuffer(
  s: CampaignState,
  opts: { untrainableFirst?: boolean } & CurationMode = {}
): BufferedGroup[] {
  const excess = s.buffer.length - bufferCapacity(s.config);
  if (excess <= 0) return [];
  // untrainableFirst false: every group counts as usable, i.e. the oldest go first (runs recorded before it).
  const untrainableFirst = opts.untrainableFirst ?? true;
  const usable = new Set(
    s.buffer.filter((g) => !untrainableFirst || curateBuffered(s, g, opts).kind === 'train').map((g) => g.groupId)
  );
  const dropOrder = [
    ...s.buffer.filter((g) => !usable.has(g.groupId)),
    ...s.buffer.filter((g) => usable.has(g.groupId)),
  ];
  const dropped = new Set(dropOrder.slice(0, excess).map((g) => g.groupId));
  const out = s.buffer.filter((g) => dropped.has(g.groupId));
  s.buffer = s.buffer.filter((g) => !dropped.has(g.groupId));
  s.staleDropped += out.length;
  return out;
}

/** Success rate of the latest episodes over all tasks (for status and the UI). */
export function recentSuccess(s: CampaignState): number {
  let sum = 0;
  let n = 0;
  for (const st of Object.values(s.stats)) {
    for (const r of st.recentRewards.slice(-16)) {
      sum += isSuccessReward(s, r) ? 1 : 0;
      n++;
    }
  }
  return n === 0 ? 0 : sum / n;
}

export interface TrainBatch {
  groups: TrainGroupRef[];
  /** Buffered groups the batch used or dropped (removed from the buffer when the step is started). */
  takenGroupIds: string[];
  skipped: Array<{ groupId: string; reason: string }>;
  /** The versions a sample may come from: the head and its ancestors within maxStaleness (head first). */
  allowedVersions: number[];
}

/** Is this buffered trajectory trainable on the current head (pooled successes are exempt, as in DART)? */
export function isTrainable(s: CampaignState, t: BufferedTrajectory): boolean {
  return t.injectedFromPool || isFreshFor(s.lineage, s.policyVersion, t, s.config.curation.maxStaleness);
}

/**
 * How a buffered group's rewards enter DART's curation rules (accuracy < accMax, all-failed → pooled success,
 * down-sampling keeps a success). `successRewards` (the default): each reward as its success indicator
 * (reward ≥ campaign.successThreshold → 1, else 0), so the rules read the group's accuracy whatever the
 * reward scale; the trainer still gets the raw rewards. Runs recorded before it (false) used raw rewards,
 * which is the same for 0/1 rewards but wrong for MiniWoB's −1/1: the rules leave a negative reward out as
 * DART's broken run, so a group with one success in four had one valid reward ("too few") and an all-failed
 * group never got its pooled success.
 */
export interface CurationMode {
  successRewards?: boolean;
}

type CuratedTrajectory = CandidateTrajectory & BufferedTrajectory & { rawReward: number | null };

type CuratedBuffered = { kind: 'train'; trajectories: CuratedTrajectory[] } | { kind: 'skip'; reason: string };

/**
 * DART §3.4 for one buffered group on the current head: its fresh trajectories through eligibility, pool
 * injection and down-sampling (deterministic: the down-sampling is seeded by the group id).
 */
function curateBuffered(s: CampaignState, g: BufferedGroup, mode: CurationMode = {}): CuratedBuffered {
  const c = s.config;
  const fresh = g.trajectories.filter((t) => isTrainable(s, t));
  const online = fresh.filter((t) => !t.injectedFromPool);
  const pool = fresh.filter((t) => t.injectedFromPool);
  // Per-task group of DART = our task+seed group; its size is the n we asked for (dynamic), so the
  // "enough rows" rule becomes: at least 2 fresh online episodes.
  const rng = createPrng(hashSeed(`${g.groupId}/select`));
  const successRewards = mode.successRewards ?? true;
  // curation.stepDiscount (1 = DART; absent in configs carried from before the field): both the curation
  // reward and the reward GRPO sees shrink by γ per step after the first — positive rewards only, so a
  // failure (0, MiniWoB's −1) is not made milder by stalling before it.
  const gamma = c.curation.stepDiscount ?? 1;
  const asCandidate = (t: BufferedTrajectory): CuratedTrajectory => {
    const reward = successRewards && t.reward !== null ? successIndicator(s, t.reward) : t.reward;
    if (gamma === 1 || t.reward === null || t.reward <= 0) return { ...t, createdAt: 0, rawReward: t.reward, reward };
    const factor = stepDiscountFactor(gamma, t.numSteps);
    return { ...t, createdAt: 0, rawReward: t.reward * factor, reward: reward * factor };
  };
  const curated = curateGroup(online.map(asCandidate), pool.map(asCandidate), rng, {
    accMax: c.curation.accMax,
    perTaskLimit: Math.min(2, online.length || 2),
    groupSize: c.curation.groupSize,
    experiencePool: c.curation.experiencePool,
    skipEqualRewards: gamma < 1,
  });
  if (curated.kind === 'train') return { kind: 'train', trajectories: curated.trajectories };
  const stale = online.length < g.trajectories.filter((t) => !t.injectedFromPool).length;
  return { kind: 'skip', reason: stale ? `stale/${curated.reason}` : curated.reason };
}

/**
 * DART §3.4 for the buffered groups: drop trajectories that are too stale for the version being trained
 * (measured along the lineage; data of abandoned branches never qualifies), apply eligibility / pool
 * injection / down-sampling per group, take up to maxGroups oldest-first. Returns null when fewer than
 * minGroups are trainable (the trainer waits for data).
 */
export function selectTrainBatch(
  s: CampaignState,
  opts: { minGroups?: number } & CurationMode = {}
): TrainBatch | null {
  const c = s.config;
  const groups: TrainGroupRef[] = [];
  const takenGroupIds: string[] = [];
  const skipped: TrainBatch['skipped'] = [];
  for (const g of s.buffer) {
    if (groups.length >= c.trainer.maxGroups) break;
    takenGroupIds.push(g.groupId);
    const curated = curateBuffered(s, g, opts);
    if (curated.kind === 'skip') {
      skipped.push({ groupId: g.groupId, reason: curated.reason });
      continue;
    }
    groups.push({
      groupId: g.groupId,
      taskId: g.taskId,
      trajectories: curated.trajectories.map((t) => ({
        trajectoryId: t.trajectoryId,
        manifestKey: manifestKeyOf(s.campaignId, t),
        // The raw reward (e.g. OSWorld's 0.25 partial score): GRPO's advantages come from it.
        reward: t.rawReward ?? t.reward,
        injectedFromPool: t.injectedFromPool,
      })),
    });
  }
  if (groups.length < (opts.minGroups ?? c.trainer.minGroups)) return null;
  const allowedVersions = ancestry(s.lineage, s.policyVersion, c.curation.maxStaleness);
  return { groups, takenGroupIds, skipped, allowedVersions };
}

/** Removes the groups a started train step took (each trajectory is consumed at most once). */
export function takeFromBuffer(s: CampaignState, batch: TrainBatch): void {
  const taken = new Set(batch.takenGroupIds);
  s.staleDropped += batch.skipped.filter((x) => x.reason.startsWith('stale')).length;
  s.buffer = s.buffer.filter((g) => !taken.has(g.groupId));
  s.consumedCount += batch.groups.reduce((a, g) => a + g.trajectories.filter((t) => !t.injectedFromPool).length, 0);
}

/** Groups that can no longer become trainable (stale or from an abandoned branch) are dropped. */
export function pruneStaleBuffer(s: CampaignState): number {
  const before = s.buffer.length;
  s.buffer = s.buffer.filter((g) => g.trajectories.some((t) => isTrainable(s, t)));
  const dropped = before - s.buffer.length;
  s.staleDropped += dropped;
  return dropped;
}

/**
 * A train step's new version arrived. It becomes the head only if it was trained from the current head;
 * if the head moved meanwhile (a rollback or a pin), the version is recorded in the lineage but
 * abandoned, and never served.
 */
export function adoptTrainedVersion(
  s: CampaignState,
  r: { version: number; fromVersion: number }
): 'adopted' | 'abandoned' {
  addVersion(s.lineage, r.version, r.fromVersion);
  s.trainSteps++;
  if (r.fromVersion !== s.policyVersion) {
    s.abandonedVersions++;
    return 'abandoned';
  }
  s.policyVersion = r.version;
  // Newest wins: a version waiting for the rollout in flight replaces an older waiting one.
  s.pendingRollout = r.version;
  return 'adopted';
}

/** The live policy servers changed (registry refresh, or a rollout found one gone). */
export function setEndpoints(s: CampaignState, live: PolicyEndpoint[]): void {
  s.endpoints = [...live];
  const ids = new Set(live.map((e) => e.serverId));
  s.servedVersions = Object.fromEntries(Object.entries(s.servedVersions).filter(([id]) => ids.has(id)));
}

export interface RolloutOutcome {
  version: number;
  ok: boolean;
  servedVersions: Record<string, number>;
  /** Servers that never picked their reload up (dead): removed, not a reason to roll back. */
  droppedServers?: string[];
  reason?: string;
}

/**
 * A model rollout finished. Ok: the servers serve the new version. Refused (a failed load or canary
 * gate): the version and every version trained from it are abandoned, training goes on from the nearest
 * ancestor a live server still serves, and buffered data from the abandoned branch is pruned by the caller.
 */
export function applyRolloutOutcome(s: CampaignState, r: RolloutOutcome): 'ok' | 'rolled-back' {
  s.rollout = null;
  const dropped = new Set(r.droppedServers ?? []);
  s.endpoints = s.endpoints.filter((e) => !dropped.has(e.serverId));
  const live = new Set(s.endpoints.map((e) => e.serverId));
  s.servedVersions = Object.fromEntries(Object.entries(r.servedVersions).filter(([id]) => live.has(id)));
  if (r.ok) {
    s.rolloutsSinceEval++;
    return 'ok';
  }
  s.rolledBack++;
  const onRefusedBranch = (v: number) => ancestry(s.lineage, v, 1_000).includes(r.version);
  if (s.pendingRollout !== null && onRefusedBranch(s.pendingRollout)) s.pendingRollout = null;
  if (onRefusedBranch(s.policyVersion)) {
    s.policyVersion = rollbackTarget(s.lineage, r.version, Object.values(s.servedVersions));
    s.abandonedVersions++;
  }
  return 'rolled-back';
}

/** Versions the lineage must keep: the head, what is served, rolled out, pending, pinned, the KL reference. */
export function liveVersions(s: CampaignState): number[] {
  return [
    s.policyVersion,
    s.referenceVersion,
    ...Object.values(s.servedVersions),
    ...(s.rollout ? [s.rollout.version] : []),
    ...(s.pendingRollout !== null ? [s.pendingRollout] : []),
    ...(s.pinnedVersion !== null ? [s.pinnedVersion] : []),
    ...(s.train ? [s.train.fromVersion] : []),
  ];
}

/** Keeps the lineage bounded over thousands of train steps. */
export function compactLineage(s: CampaignState): void {
  s.lineage = pruneLineage(s.lineage, liveVersions(s), s.config.curation.maxStaleness + 2);
}

export function recordEval(s: CampaignState, point: EvalPoint): void {
  s.evals.push(point);
  s.evals.splice(0, Math.max(0, s.evals.length - EVALS_KEPT));
}

/**
 * The policy settings the trainer's activities get (seed and architecture). The architecture options only
 * when on, so the inputs of every other campaign stay what they were.
 */
export function trainerPolicyOf(
  c: CampaignConfig
): { seed: number; width: number } & Partial<Record<ArchitectureOption, true>> {
  return { seed: c.policy.seed, width: c.policy.width, ...architectureOptionsOn(c.policy) };
}

/** Benchmarks: the simulated trainer's step time, scaled like the simulated env's latencies. */
export function simulatedTrainStepMs(c: CampaignConfig): number {
  return Math.round(c.trainer.simulatedStepSeconds * c.env.simulatedTimeScale * 1000);
}

/**
 * Whether one evaluation meets the target: overall and on every task family (not just on average), over at
 * least `minEpisodesPerFamily` greedy episodes per family (per-family counts when the point has them,
 * otherwise its episodes split evenly over its families).
 */
export function evalMeetsTarget(p: EvalPoint, target: number, minEpisodesPerFamily = 0): boolean {
  const families = Object.keys(p.perFamily);
  const counts = p.episodesPerFamily;
  const enough = families.every(
    (f) => (counts?.[f] ?? p.episodes / Math.max(1, families.length)) >= minEpisodesPerFamily
  );
  return enough && p.successRate >= target && families.every((f) => p.perFamily[f]! >= target);
}

/** `nowMs`: workflow time (deterministic), for campaign.maxMinutes. */
export function shouldStop(s: CampaignState, nowMs?: number): boolean {
  const c = s.config.campaign;
  if (s.stopRequested) return true;
  if (s.trainSteps >= c.maxTrainSteps || s.episodes >= c.maxEpisodes) return true;
  if (c.maxMinutes !== undefined && nowMs !== undefined && nowMs - s.startedAtMs >= c.maxMinutes * 60_000) return true;
  if (c.targetSuccess === undefined) return false;
  // The last `targetConsecutiveEvals` evaluations (1 unless configured) all meet the target.
  const k = c.targetConsecutiveEvals ?? 1;
  const lastK = s.evals.slice(-k);
  if (lastK.length < k) return false;
  return lastK.every((p) => evalMeetsTarget(p, c.targetSuccess!, c.targetMinEpisodesPerFamily ?? 0));
}

export function campaignStatus(s: CampaignState): CampaignStatus {
  const pausable = s.phase === 'running' || s.phase === 'warm-start';
  return {
    campaignId: s.campaignId,
    phase: s.paused && pausable ? 'paused' : s.phase,
    mode: s.config.campaign.mode,
    policyVersion: s.policyVersion,
    servedVersions: { ...s.servedVersions },
    pinnedVersion: s.pinnedVersion,
    episodes: s.episodes,
    trainSteps: s.trainSteps,
    groupsInFlight: Object.keys(s.inFlight).length,
    episodesInFlight: episodesInFlight(s),
    bufferedGroups: s.buffer.length,
    trainInFlight: s.train !== null,
    recentSuccessRate: recentSuccess(s),
    lastEval: s.evals.at(-1) ?? null,
    evals: s.evals.slice(-20),
    infraFailures: s.infraFailures,
    rolledBack: s.rolledBack,
    staleDropped: s.staleDropped,
    startedAtMs: s.startedAtMs,
    runIndex: s.runIndex,
  };
}
