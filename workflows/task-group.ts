/**
 * taskGroupWorkflow — DART's rollout-per-task: n episodes of one task and seed (a GRPO group) on the
 * env queue, in parallel. Infra failures (after retries) are counted, never turned into reward 0. When
 * every episode failed, a pooled success of the task joins the summary so the group carries signal.
 * Reports a compact summary to the campaign by workflow id (so it reaches the campaign's latest run,
 * across continue-as-new).
 */
import { getExternalWorkflowHandle, log, workflowInfo } from '@temporalio/workflow';
import type { GroupSummary, TrajectorySummary } from '../schemas/campaign';
import { envActivities, dataLocalActivities } from './activity-proxies';
import { groupFinishedSignal } from './messages';
import { toTrajectorySummary } from './logic/trajectory-summary';

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
  /** Successes of this group to add to the task's pool (the campaign knows how many the pool still wants). */
  poolWanted: number;
  source?: 'rollout' | 'precollect' | 'demo';
  /** Demonstrations only: episode i uses seed + i (a GRPO group always shares one seed). */
  distinctSeeds?: boolean;
}

const { runEpisode, runEpisodes } = envActivities;

const data = dataLocalActivities;

export async function taskGroupWorkflow(input: TaskGroupInput): Promise<GroupSummary> {
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
  // All n episodes in one activity (one env worker, concurrent over its slots); an episode that failed
  // for infrastructure reasons is retried on its own with Temporal's retry policy, keeping its id.
  const outcomes = await runEpisodes({ episodes });
  const results = await Promise.allSettled(
    outcomes.map(async (o, i) => {
      if (o.ok) return o.result;
      if (o.nonRetryable) throw new Error(`${o.errorType}: ${o.message}`);
      return runEpisode(episodes[i]!);
    })
  );
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
  const successes = trajectories.filter((t) => (t.reward ?? 0) > 0);
  if (successes.length > 0 && input.poolWanted > 0) {
    await data.addToPool({ campaignId: input.campaignId, trajectories: successes.slice(0, input.poolWanted) });
  }
  if (input.experiencePool && trajectories.length > 0 && successes.length === 0) {
    const pooled = await data.findPoolSuccess({ campaignId: input.campaignId, taskId: input.task.id });
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
  if (input.parentWorkflowId && input.parentWorkflowId !== workflowInfo().workflowId) {
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(groupFinishedSignal, summary);
    } catch (err) {
      // The campaign already finished (stopped or done): the summary is still this workflow's result.
      log.warn('campaign not reachable; group result kept as workflow result only', { error: String(err) });
    }
  }
  return summary;
}
