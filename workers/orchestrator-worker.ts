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
import { specForPolicy } from '../policy/spec';
import { installQuietRuntime } from '../infra/runtime';
import { createOrchestratorMetrics } from '../metrics/orchestrator';
import { withMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
import type { InfraSettings } from '../infra/settings';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { connectWorker, retryStartup } from '../infra/temporal-connection';
import { TASK_QUEUES } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';
import { runWorkerMain } from './run-worker';
import { orchestratorWorkflowCode } from './workflow-bundle';

export function createOrchestratorActivities(store: ObjectStore) {
  return {
    ...createProofActivities({ store }),
    ...createCampaignDataActivities({ store }),
    ...createChildActivities(),
    ...createCampaignSetupActivities({
      store,
      ensureInitialCheckpoint: (campaignId, config) =>
        ensureInitialCheckpoint(store, campaignId, specForPolicy(config.policy), config.policy.seed),
    }),
  };
}

/** Worker Deployment name of the orchestrator workers when DARTFLOW_BUILD_ID opts into Worker Versioning. */
export const ORCHESTRATOR_DEPLOYMENT = 'dartflow-orchestrator';

/**
 * Optional Worker Versioning (docs/upgrades.md). Unset DARTFLOW_BUILD_ID (the default): an unversioned
 * worker, as before. Set: the worker joins the Worker Deployment `dartflow-orchestrator` (or
 * DARTFLOW_DEPLOYMENT_NAME) under that build id and gets tasks only once the version is made current or
 * ramping (`temporal worker deployment set-current-version`). AUTO_UPGRADE, not PINNED: a campaign lives
 * for days and continues-as-new into the same version, so PINNED would tie it to the old build for its
 * whole life; with AUTO_UPGRADE it moves to the current build at its next workflow task, which is why
 * workflow changes still go behind patches.
 */
export function orchestratorVersioning(env: NodeJS.ProcessEnv = process.env): Partial<WorkerOptions> {
  const buildId = env.DARTFLOW_BUILD_ID?.trim();
  if (!buildId) return {};
  const deploymentName = env.DARTFLOW_DEPLOYMENT_NAME?.trim() || ORCHESTRATOR_DEPLOYMENT;
  // The server joins them as `<deploymentName>.<buildId>`; a dot in the name would make that ambiguous.
  if (deploymentName.includes('.') || buildId.length > 255)
    throw new Error(
      `DARTFLOW_DEPLOYMENT_NAME must not contain "." and DARTFLOW_BUILD_ID must be ≤ 255 characters (got "${deploymentName}", ${buildId.length} characters)`
    );
  return {
    workerDeploymentOptions: {
      version: { deploymentName, buildId },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    },
  };
}

export async function createOrchestratorWorker(
  settings: InfraSettings,
  overrides: Partial<WorkerOptions> = {},
  metrics?: WorkerMetrics
): Promise<Worker> {
  installQuietRuntime();
  if (metrics) metrics.activityInterceptors.push(createOrchestratorMetrics(metrics.registry).interceptor);
  const store = ObjectStore.fromSettings(settings);
  await retryStartup(`reaching object storage at ${store.endpoint}`, () => store.ensureBucket());
  const connection = await connectWorker(settings);
  const { workflowInterceptors, ...workflowCode } = orchestratorWorkflowCode();
  return Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    taskQueue: TASK_QUEUES.orchestrator,
    ...workflowCode,
    activities: createOrchestratorActivities(store),
    interceptors: withMetrics(payloadGuardInterceptors({ workflows: workflowInterceptors }), metrics),
    // Activities here are short data-manager calls; in-flight ones finish on SIGTERM.
    shutdownGraceTime: '30 seconds',
    ...orchestratorVersioning(),
    ...overrides,
  });
}

if (require.main === module)
  runWorkerMain('orchestrator', TASK_QUEUES.orchestrator, (settings, metrics) =>
    createOrchestratorWorker(settings, {}, metrics)
  );
