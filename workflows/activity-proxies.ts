/**
 * Activity proxies shared by the workflows, so every workflow calls an activity type with the same
 * task queue, timeouts and retry policy.
 */
import { proxyActivities, proxyLocalActivities, type ActivityOptions } from '@temporalio/workflow';
import type { createCampaignDataActivities } from '../activities/data/campaign-data';
import type { createChildActivities } from '../activities/data/children';
import type { EnvActivities } from '../activities/env/run-episode';
import type { createTrainerActivities } from '../activities/trainer/train-step';
import { TASK_QUEUES } from '../schemas/task-queues';

/**
 * Env workers: one activity per episode (the unit of scheduling, as DART's rollout-wise scheduling), so an
 * env worker runs about as many episodes as it has slots (a few more on browser pools, waiting seconds for
 * an env: workers/env-worker.ts activitySlotsFor) and no timeout grows with the queue: an episode
 * waits in Temporal's task queue (no schedule-to-start limit) until some worker has a free slot, then has
 * 15 minutes (seconds on the browser env, minutes on OSWorld); heartbeats catch dead workers: every step,
 * and kept alive through long env operations such as an OSWorld reset, so a live attempt is never timed out
 * and retried on a second env beside itself (an episode that ends within its first 10 s sends none:
 * activities/env/heartbeat-gate.ts).
 */
const envOptions = {
  taskQueue: TASK_QUEUES.env,
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 5,
    nonRetryableErrorTypes: ['TaskConfigError', 'InvalidEpisodeInput'],
  },
} as const satisfies ActivityOptions;

export const envActivities = proxyActivities<EnvActivities>(envOptions);

/**
 * The env activities with the campaign's env.episodeHeartbeatTimeoutSeconds (absent: the default minute,
 * as for runs recorded before the field). Replay does not compare activity options, so no patch.
 */
export function envActivitiesWith(heartbeatTimeoutMs: number | undefined): EnvActivities {
  if (heartbeatTimeoutMs === undefined) return envActivities;
  return proxyActivities<EnvActivities>({ ...envOptions, heartbeatTimeout: heartbeatTimeoutMs });
}

/**
 * The same data-manager activities as local activities: the orchestrator worker that runs the workflow
 * runs them itself, without a task-queue round trip through the server (task groups' pool reads and
 * writes: two workflow tasks and an activity dispatch fewer per call).
 */
export const dataLocalActivities = proxyLocalActivities<ReturnType<typeof createCampaignDataActivities>>({
  startToCloseTimeout: '1 minute',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

/** Data-manager activities on the orchestrator queue: short MinIO reads and writes. */
export const dataActivities = proxyActivities<ReturnType<typeof createCampaignDataActivities>>({
  taskQueue: TASK_QUEUES.orchestrator,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

/**
 * The trainer. A train step is seconds on the embedded policy and minutes for a VLM; a heartbeat per
 * minibatch (and while samples load) detects a dead trainer fast, and the step is retried elsewhere
 * (trainStep is idempotent: a retry returns the checkpoint a live attempt already committed).
 */
const trainerOptions = {
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: {
    initialInterval: '2 seconds',
    maximumInterval: '1 minute',
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['NonFiniteLossError', 'CheckpointMismatchError', 'InvalidTrainInput'],
  },
} as const satisfies Omit<ActivityOptions, 'taskQueue'>;

type TrainerActivities = ReturnType<typeof createTrainerActivities>;

export const trainerActivities = proxyActivities<TrainerActivities>({
  ...trainerOptions,
  taskQueue: TASK_QUEUES.trainer,
});

/**
 * The trainer activities on another queue (a VLM campaign's Python trainer: TASK_QUEUES.trainerVlm) and/or
 * with the campaign's trainer.heartbeatTimeoutSeconds, the other timeouts and retries the same. Replay
 * compares neither an activity's task queue nor its timeouts, so choosing them per call needs no patch.
 */
export function trainerActivitiesOn(taskQueue: string | undefined, heartbeatTimeoutMs?: number): TrainerActivities {
  const queue = taskQueue ?? TASK_QUEUES.trainer;
  if (queue === TASK_QUEUES.trainer && heartbeatTimeoutMs === undefined) return trainerActivities;
  return proxyActivities<TrainerActivities>({
    ...trainerOptions,
    taskQueue: queue,
    ...(heartbeatTimeoutMs !== undefined ? { heartbeatTimeout: heartbeatTimeoutMs } : {}),
  });
}

/** trainer.heartbeatTimeoutSeconds in ms; undefined for configs recorded before the field (the default minute). */
export const trainerHeartbeatMs = (trainer: { heartbeatTimeoutSeconds?: number }): number | undefined =>
  trainer.heartbeatTimeoutSeconds === undefined ? undefined : trainer.heartbeatTimeoutSeconds * 1000;

/** The trainer queue of a campaign's policy kind: the Python VLM trainer's for `vlm`, else the TypeScript one's. */
export const trainerQueueOf = (policyKind: string): string =>
  policyKind === 'vlm' ? TASK_QUEUES.trainerVlm : TASK_QUEUES.trainer;

/** describeChildren: what became of children a campaign or scheduler shard can no longer watch. */
export const childActivities = proxyActivities<ReturnType<typeof createChildActivities>>({
  taskQueue: TASK_QUEUES.orchestrator,
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
});
