/**
 * Trainer worker: `trainStep` and `behaviourClone` on the `trainer` task queue. One train step at a time
 * (a fixed-size slot: the trainer owns its CPU/GPU); onnxruntime blocks the event loop per minibatch, so
 * the heartbeat timeout is generous and heartbeats go out between minibatches (and per trajectory while
 * samples load). An attempt that outlives its heartbeat timeout may still be running when the retry starts
 * on another trainer: the commit (activities/trainer/commit.ts) lets only one of them write the step.
 */
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { createTrainerActivities } from '../activities/trainer/train-step';
import { installQuietRuntime } from '../infra/runtime';
import { createTrainerMetrics } from '../metrics/trainer';
import { withMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
import type { InfraSettings } from '../infra/settings';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { connectWorker, retryStartup } from '../infra/temporal-connection';
import { TASK_QUEUES } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';
import { runWorkerMain } from './run-worker';

export async function createTrainerWorker(
  settings: InfraSettings,
  overrides: Partial<WorkerOptions> = {},
  metrics?: WorkerMetrics
): Promise<Worker> {
  installQuietRuntime();
  const store = ObjectStore.fromSettings(settings);
  await retryStartup(`reaching object storage at ${store.endpoint}`, () => store.ensureBucket());
  const connection = await connectWorker(settings);
  const threads = Number(process.env.DARTFLOW_TRAINER_THREADS ?? 1);
  if (metrics) metrics.activityInterceptors.push(createTrainerMetrics(metrics.registry).interceptor);
  return Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    taskQueue: TASK_QUEUES.trainer,
    activities: createTrainerActivities({ store, threads }),
    maxConcurrentActivityTaskExecutions: 1,
    interceptors: withMetrics(payloadGuardInterceptors(), metrics),
    // Let an in-flight step finish on SIGTERM; a kill -9 is covered by the step's idempotency.
    shutdownGraceTime: '2 minutes',
    ...overrides,
  });
}

if (require.main === module)
  runWorkerMain('trainer', TASK_QUEUES.trainer, (settings, metrics) => createTrainerWorker(settings, {}, metrics));
