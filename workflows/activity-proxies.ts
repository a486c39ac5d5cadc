/**
 * Activity proxies shared by the workflows, so every workflow calls an activity type with the same
 * task queue, timeouts and retry policy.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createCampaignDataActivities } from '../activities/data/campaign-data';
import type { EnvActivities } from '../activities/env/run-episode';
import { TASK_QUEUES } from '../schemas/task-queues';

/** Env workers: an episode is seconds on the browser env, minutes on OSWorld; heartbeats every step catch dead workers fast. */
export const envActivities = proxyActivities<EnvActivities>({
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
});

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
