/**
 * Orchestrator worker: runs dartflow's workflows and data-manager activities on the `orchestrator`
 * task queue. Light on CPU; one per deployment is enough (more for redundancy).
 */
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { createCampaignDataActivities } from '../activities/data/campaign-data';
import { createCampaignSetupActivities } from '../activities/data/campaign-setup';
import { createChildActivities } from '../activities/data/children';
import { createProofActivities } from '../activities/data/proof';
import { ensureInitialCheckpoint } from '../activities/trainer/checkpoints';
import { specForWidth } from '../activities/trainer/train-step';
import { installQuietRuntime } from '../infra/runtime';
import type { InfraSettings } from '../infra/settings';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { connectWorker, retryStartup } from '../infra/temporal-connection';
import { TASK_QUEUES } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';
import { runWorkerMain } from './run-worker';

export function createOrchestratorActivities(store: ObjectStore) {
  return {
    ...createProofActivities({ store }),
    ...createCampaignDataActivities({ store }),
    ...createChildActivities(),
    ...createCampaignSetupActivities({
      store,
      ensureInitialCheckpoint: (campaignId, config) =>
        ensureInitialCheckpoint(store, campaignId, specForWidth(config.policy.width), config.policy.seed),
    }),
  };
}

export async function createOrchestratorWorker(
  settings: InfraSettings,
  overrides: Partial<WorkerOptions> = {}
): Promise<Worker> {
  installQuietRuntime();
  const store = ObjectStore.fromSettings(settings);
  await retryStartup(`reaching object storage at ${store.endpoint}`, () => store.ensureBucket());
  const connection = await connectWorker(settings);
  return Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    taskQueue: TASK_QUEUES.orchestrator,
    workflowsPath: require.resolve('../workflows'),
    activities: createOrchestratorActivities(store),
    interceptors: payloadGuardInterceptors({ workflows: true }),
    // Activities here are short data-manager calls; in-flight ones finish on SIGTERM.
    shutdownGraceTime: '30 seconds',
    ...overrides,
  });
}

if (require.main === module)
  runWorkerMain('orchestrator', TASK_QUEUES.orchestrator, (settings) => createOrchestratorWorker(settings));
