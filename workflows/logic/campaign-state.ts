/**
 * The campaign's state and its transitions, as pure functions (no Temporal, no I/O) so the workflow stays
 * a thin loop and the rules are unit-tested directly. The state is what continue-as-new carries.
 */
import {
  createPrng,
  curateGroup,
  dynamicMaxSteps,
  dynamicRolloutNumber,
  hashSeed,
  isHardTask,
  recentSuccessRate,
  type CandidateTrajectory,
} from '../../algorithms';
import type { TrainGroupRef } from '../../activities/trainer/types';
import type { CampaignConfig } from '../../schemas/config';
import type {
  CampaignPhase,
  CampaignStatus,
  EvalPoint,
  GroupSummary,
  TaskStats,
  TrajectorySummary,
} from '../../schemas/campaign';

/** How many recent rewards a task keeps (bounds the carried state). */
export const STATS_WINDOW = 64;
/** Evaluation points kept in the workflow (all of them are also in MinIO via the curve activity). */
export const EVALS_KEPT = 200;

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
}

export interface CampaignState {
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
  /** Latest-success lengths and rewards per task, for dynamic max steps (bounded like stats). */
  outcomes: Record<string, Array<{ reward: number | null; numSteps: number }>>;
  /** Finished groups waiting for a train step, oldest first. */
  buffer: GroupSummary[];
  inFlight: Record<string, InFlightGroup>;
  policyVersion: number;
  /** Reference policy of the KL term: v0, or the behaviour-cloned warm start (DART: the SFT model). */
  referenceVersion: number;
  servedVersions: Record<string, number>;
  pinnedVersion: number | null;
  trainSteps: number;
  episodes: number;
  infraFailures: number;
  staleDropped: number;
  /** Model rollouts that were rolled back (failed load or canary gate). */
  rolledBack: number;
  evals: EvalPoint[];
  lastEvalVersion: number;
  /** Trajectory ids already consumed by a train step (guards "each at most once" in the workflow too). */
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
    outcomes: Object.fromEntries(args.tasks.map((t) => [t.id, []])),
    buffer: [],
    inFlight: {},
    policyVersion: args.initialVersion,
    referenceVersion: args.initialVersion,
    servedVersions: {},
    pinnedVersion: null,
    trainSteps: 0,
    episodes: 0,
    infraFailures: 0,
    staleDropped: 0,
    rolledBack: 0,
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
}

export const episodesInFlight = (s: CampaignState): number => Object.values(s.inFlight).reduce((a, g) => a + g.n, 0);

/** DART §4.6/§4.7 for one task: rollout count and step budget from its history. */
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
  const maxSteps = dynamicMaxSteps(s.outcomes[task.id] ?? [], {
    enabled: r.dynamicMaxSteps,
    maxSteps: cap,
    margin: r.maxStepsMargin,
    minSteps: 1,
  });
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
  const task = active[s.cursor % active.length]!;
  const { n, maxSteps } = rolloutPlanFor(s, task);
  const inFlight = episodesInFlight(s);
  // Always allow one group when idle, even if n exceeds the configured concurrency.
  if (inFlight > 0 && inFlight + n > s.config.rollout.envConcurrency) return null;
  const groupId = `${s.campaignId}-g${String(s.groupSeq).padStart(6, '0')}`;
  const rng = createPrng(hashSeed(groupId));
  const span = task.trainSeeds.to - task.trainSeeds.from;
  const seed = task.trainSeeds.from + rng.nextInt(Math.max(1, Math.min(span, 2 ** 31 - 1)));
  const st = s.stats[task.id];
  const poolWanted = s.config.curation.experiencePool
    ? Math.max(0, s.config.curation.precollectSuccessesPerTask - (st?.poolSize ?? 0))
    : 0;
  return { groupId, task, seed, n, maxSteps, poolWanted };
}

export function markGroupStarted(s: CampaignState, plan: GroupPlan, nowMs: number): void {
  s.inFlight[plan.groupId] = { groupId: plan.groupId, taskId: plan.task.id, n: plan.n, startedAtMs: nowMs };
  s.cursor++;
  s.groupSeq++;
  const st = s.stats[plan.task.id];
  if (st) st.lastN = plan.n;
}

/** A finished group: update task statistics and buffer it for training. Duplicate reports are ignored. */
export function recordGroup(s: CampaignState, g: GroupSummary, poolAdded: number): boolean {
  if (!s.inFlight[g.groupId]) return false; // duplicate or unknown (e.g. a retried signal)
  delete s.inFlight[g.groupId];
  s.infraFailures += g.infraFailures;
  const st = s.stats[g.taskId] ?? (s.stats[g.taskId] = emptyTaskStats(g.taskId));
  const outcomes = s.outcomes[g.taskId] ?? (s.outcomes[g.taskId] = []);
  for (const t of g.trajectories) {
    if (t.injectedFromPool || t.reward === null) continue;
    s.episodes++;
    st.episodes++;
    if (t.reward > 0) st.successes++;
    st.recentRewards.push(t.reward);
    outcomes.push({ reward: t.reward, numSteps: t.numSteps });
  }
  st.recentRewards.splice(0, Math.max(0, st.recentRewards.length - STATS_WINDOW));
  outcomes.splice(0, Math.max(0, outcomes.length - STATS_WINDOW));
  st.poolSize += poolAdded;
  st.hard = isHardTask([...st.recentRewards].reverse().slice(0, Math.max(st.lastN, 1)));
  if (g.trajectories.some((t) => t.reward !== null)) s.buffer.push(g);
  return true;
}

/** Success rate of the latest episodes over all tasks (for status and the UI). */
export function recentSuccess(s: CampaignState): number {
  let sum = 0;
  let n = 0;
  for (const st of Object.values(s.stats)) {
    for (const r of st.recentRewards.slice(-16)) {
      sum += r > 0 ? 1 : 0;
      n++;
    }
  }
  return n === 0 ? 0 : sum / n;
}

const asCandidate = (t: TrajectorySummary): CandidateTrajectory & TrajectorySummary => ({ ...t, createdAt: 0 });

export interface TrainBatch {
  groups: TrainGroupRef[];
  /** Buffered groups the batch used or dropped (removed from the buffer when the step is started). */
  takenGroupIds: string[];
  skipped: Array<{ groupId: string; reason: string }>;
}

/**
 * DART §3.4 for the buffered groups: drop trajectories whose newest step is too stale for the version
 * being trained, apply eligibility / pool injection / down-sampling per group, take up to maxGroups
 * oldest-first. Returns null when fewer than minGroups are trainable (the trainer waits for data).
 */
export function selectTrainBatch(s: CampaignState, opts: { minGroups?: number } = {}): TrainBatch | null {
  const c = s.config;
  const trainVersion = s.policyVersion;
  const groups: TrainGroupRef[] = [];
  const takenGroupIds: string[] = [];
  const skipped: TrainBatch['skipped'] = [];
  for (const g of s.buffer) {
    if (groups.length >= c.trainer.maxGroups) break;
    const fresh = g.trajectories.filter(
      (t) => t.injectedFromPool || t.maxPolicyVersion >= trainVersion - c.curation.maxStaleness
    );
    const online = fresh.filter((t) => !t.injectedFromPool);
    const pool = fresh.filter((t) => t.injectedFromPool);
    takenGroupIds.push(g.groupId);
    // Per-task group of DART = our task+seed group; its size is the n we asked for (dynamic), so the
    // "enough rows" rule becomes: at least 2 fresh online episodes.
    const rng = createPrng(hashSeed(`${g.groupId}/select`));
    const curated = curateGroup(online.map(asCandidate), pool.map(asCandidate), rng, {
      accMax: c.curation.accMax,
      perTaskLimit: Math.min(2, online.length || 2),
      groupSize: c.curation.groupSize,
      experiencePool: c.curation.experiencePool,
    });
    if (curated.kind === 'skip') {
      skipped.push({
        groupId: g.groupId,
        reason:
          online.length < g.trajectories.filter((t) => !t.injectedFromPool).length
            ? `stale/${curated.reason}`
            : curated.reason,
      });
      continue;
    }
    groups.push({
      groupId: g.groupId,
      taskId: g.taskId,
      trajectories: curated.trajectories.map((t) => ({
        trajectoryId: t.trajectoryId,
        manifestKey: t.manifestKey,
        reward: t.reward ?? 0,
        injectedFromPool: t.injectedFromPool,
      })),
    });
  }
  if (groups.length < (opts.minGroups ?? c.trainer.minGroups)) return null;
  return { groups, takenGroupIds, skipped };
}

/** Removes the groups a started train step took (each trajectory is consumed at most once). */
export function takeFromBuffer(s: CampaignState, batch: TrainBatch): void {
  const taken = new Set(batch.takenGroupIds);
  s.staleDropped += batch.skipped.filter((x) => x.reason.startsWith('stale')).length;
  s.buffer = s.buffer.filter((g) => !taken.has(g.groupId));
  s.consumedCount += batch.groups.reduce((a, g) => a + g.trajectories.filter((t) => !t.injectedFromPool).length, 0);
}

/** Groups that can no longer become trainable (all stale) are dropped so the buffer stays bounded. */
export function pruneStaleBuffer(s: CampaignState): number {
  const minVersion = s.policyVersion - s.config.curation.maxStaleness;
  const before = s.buffer.length;
  s.buffer = s.buffer.filter((g) => g.trajectories.some((t) => t.injectedFromPool || t.maxPolicyVersion >= minVersion));
  const dropped = before - s.buffer.length;
  s.staleDropped += dropped;
  return dropped;
}

export function recordEval(s: CampaignState, point: EvalPoint): void {
  s.evals.push(point);
  s.evals.splice(0, Math.max(0, s.evals.length - EVALS_KEPT));
}

/** Benchmarks: the simulated trainer's step time, scaled like the simulated env's latencies. */
export function simulatedTrainStepMs(c: CampaignConfig): number {
  return Math.round(c.trainer.simulatedStepSeconds * c.env.simulatedTimeScale * 1000);
}

export function shouldStop(s: CampaignState): boolean {
  const c = s.config.campaign;
  if (s.stopRequested) return true;
  if (s.trainSteps >= c.maxTrainSteps || s.episodes >= c.maxEpisodes) return true;
  const last = s.evals.at(-1);
  if (c.targetSuccess === undefined || last === undefined) return false;
  // The target holds for every task family, not just on average.
  const families = Object.values(last.perFamily);
  return last.successRate >= c.targetSuccess && families.every((v) => v >= c.targetSuccess!);
}

export function campaignStatus(s: CampaignState, live: { trainInFlight?: boolean } = {}): CampaignStatus {
  return {
    campaignId: s.campaignId,
    phase: s.paused && s.phase === 'running' ? 'paused' : s.phase,
    mode: s.config.campaign.mode,
    policyVersion: s.policyVersion,
    servedVersions: { ...s.servedVersions },
    pinnedVersion: s.pinnedVersion,
    episodes: s.episodes,
    trainSteps: s.trainSteps,
    groupsInFlight: Object.keys(s.inFlight).length,
    episodesInFlight: episodesInFlight(s),
    bufferedGroups: s.buffer.length,
    trainInFlight: live.trainInFlight ?? false,
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
