/**
 * taskGroupWorkflow — DART's rollout-per-task: n episodes of one task and seed (a GRPO group) on the
 * env queue, in parallel. Infra failures (after retries) are counted, never turned into reward 0. When
 * every episode failed, a pooled success of the task joins the summary so the group carries signal.
 * Reports a compact summary to the campaign by workflow id (so it reaches the campaign's latest run,
 * across continue-as-new).
 */
import { getExternalWorkflowHandle, log, patched, workflowInfo } from '@temporalio/workflow';
import type { GroupSummary, TrajectorySummary } from '../schemas/campaign';
import { envActivitiesWith, dataActivities, dataLocalActivities } from './activity-proxies';
import { groupFinishedSignal } from './messages';
import { toTrajectorySummary } from './logic/trajectory-summary';
import { isSuccess } from '../algorithms/success';

export interface TaskGroupInput {
  campaignId: string;
  /** Workflow id of the campaign to signal; absent for stand-alone groups. */
  parentWorkflowId?: string;
  groupId: string;
  /** The task spec inline (< 1 KB). */
  task: { id: string } & Record<string, unknown>;
  seed: number;
  n: number;
  maxSteps: number;
  policy: {
    kind: string;
    endpoints: string[];
    temperature: number;
    versionHint?: number;
    options?: Record<string, unknown>;
  };
  /** Look up a pooled success when all episodes fail (§4.8). */
  experiencePool: boolean;
  /** Pool size per task: the group offers up to this many successes; the pool keeps the newest (DART §3.4 c). */
  poolWanted: number;
  /**
   * curation.poolKey 'instruction': the pool keeps the newest poolWanted per (task, instruction), at most
   * maxPerTask per task, and an all-failed group looks its own instruction up first. Absent = per task.
   */
  poolByInstruction?: { maxPerTask: number };
  /**
   * How many successes the pool keeps per task (per instruction with poolByInstruction); default poolWanted.
   * Pre-collection offers only the successes still wanted but must keep the ones of its earlier rounds.
   */
  poolKeep?: number;
  source?: 'rollout' | 'precollect' | 'demo';
  /** reward ≥ this is a success (pool entries); default 1.0 (campaign.successThreshold). */
  successThreshold?: number;
  /** Demonstrations only: episode i uses seed + i (a GRPO group always shares one seed). */
  distinctSeeds?: boolean;
  /** env.episodeHeartbeatTimeoutSeconds in ms (absent: the default minute). */
  episodeHeartbeatTimeoutMs?: number;
}

/** Runs recorded before this patch used local activities for the pool (see campaign.ts refreshEndpoints). */
const GROUP_POOL_ACTIVITY_PATCH = 'task-group-pool-regular-activities';
const poolActivities = () => (patched(GROUP_POOL_ACTIVITY_PATCH) ? dataActivities : dataLocalActivities);

/**
 * What a group returns when it already reported its summary to the campaign by signal: a small ack, so
 * the summary is not recorded a second time in the campaign's history (as the child's result).
 */
export interface GroupReported {
  groupId: string;
  reported: true;
}

export function isGroupSummary(r: GroupSummary | GroupReported): r is GroupSummary {
  return (r as GroupSummary).trajectories !== undefined;
}

/** The summary of a group run without a campaign to report to (warm start, pre-collection). */
export function groupSummaryOf(r: GroupSummary | GroupReported): GroupSummary {
  if (!isGroupSummary(r)) throw new Error(`task group ${r.groupId} reported to a campaign; no summary returned`);
  return r;
}

export async function taskGroupWorkflow(input: TaskGroupInput): Promise<GroupSummary | GroupReported> {
  const summary = await runTaskGroup(input, poolActivities);
  if (input.parentWorkflowId && input.parentWorkflowId !== workflowInfo().workflowId) {
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(groupFinishedSignal, summary);
      return { groupId: input.groupId, reported: true };
    } catch (err) {
      // The campaign already finished (stopped or done): the summary is still this workflow's result.
      log.warn('campaign not reachable; group result kept as workflow result only', { error: String(err) });
    }
  }
  return summary;
}

/** The experience-pool activities a group calls (regular activities; local ones only in old histories). */
export type GroupPoolActivities = Pick<typeof dataActivities, 'addToPool' | 'findPoolSuccess'>;

/**
 * One group's episodes and pool bookkeeping, inside whichever workflow runs it: its own taskGroupWorkflow,
 * or a rollout lane (workflows/rollout-lane.ts) that runs many groups in one history. `pool` is called only
 * when a pool activity is due: in taskGroupWorkflow it decides a patch, whose marker must stay where
 * recorded histories have it.
 */
export async function runTaskGroup(input: TaskGroupInput, pool: () => GroupPoolActivities): Promise<GroupSummary> {
  const startedAt = Date.now();
  const episodes = Array.from({ length: input.n }, (_, i) => ({
    campaignId: input.campaignId,
    groupId: input.groupId,
    trajectoryId: `${input.groupId}-e${i}`,
    task: input.task,
    seed: input.distinctSeeds ? input.seed + i : input.seed,
    maxSteps: input.maxSteps,
    policy: {
      kind: input.policy.kind,
      endpoints: input.policy.endpoints,
      versionHint: input.policy.versionHint,
      temperature: input.policy.temperature,
      options: input.policy.options ?? {},
    },
    source: input.source ?? 'rollout',
  }));
  // One activity per episode: the unit of scheduling is the episode (any env worker with a free slot
  // takes it, so load spreads over workers and none runs more episodes than it has slots); an episode
  // that failed for infrastructure reasons is retried on its own by Temporal, keeping its id.
  const { runEpisode } = envActivitiesWith(input.episodeHeartbeatTimeoutMs);
  const results = await Promise.allSettled(episodes.map((e) => runEpisode(e)));
  const trajectories: TrajectorySummary[] = [];
  const lostTrajectoryIds: string[] = [];
  let infraFailures = 0;
  for (const [i, s] of results.entries()) {
    if (s.status === 'fulfilled' && s.value.status === 'ok' && s.value.reward !== null)
      trajectories.push(toTrajectorySummary(s.value, input.groupId));
    else {
      infraFailures++;
      lostTrajectoryIds.push(episodes[i]!.trajectoryId);
      if (s.status === 'rejected')
        log.warn('episode lost to an infrastructure failure', { groupId: input.groupId, error: String(s.reason) });
    }
  }
  const successes = trajectories.filter((t) => isSuccess(t.reward, input.successThreshold));
  if (successes.length > 0 && input.poolWanted > 0) {
    await pool().addToPool({
      campaignId: input.campaignId,
      trajectories: successes.slice(0, input.poolWanted),
      keepNewest: input.poolKeep ?? input.poolWanted,
      successThreshold: input.successThreshold,
      ...(input.poolByInstruction ? { perInstruction: input.poolByInstruction } : {}),
    });
  }
  if (input.experiencePool && trajectories.length > 0 && successes.length === 0) {
    // A group shares one seed, so its episodes share one instruction: the first one's key stands for all.
    const instructionKey = input.poolByInstruction
      ? trajectories.find((t) => t.instructionKey)?.instructionKey
      : undefined;
    const pooled = await pool().findPoolSuccess({
      campaignId: input.campaignId,
      taskId: input.task.id,
      ...(instructionKey ? { instructionKey } : {}),
    });
    if (pooled) trajectories.push({ ...pooled, groupId: input.groupId, injectedFromPool: true });
  }
  const summary: GroupSummary = {
    groupId: input.groupId,
    taskId: input.task.id,
    seed: input.seed,
    requested: input.n,
    maxSteps: input.maxSteps,
    trajectories,
    infraFailures,
    ...(lostTrajectoryIds.length > 0 ? { lostTrajectoryIds } : {}),
    startedAt,
    endedAt: Date.now(),
  };
  return summary;
}
