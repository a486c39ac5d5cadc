/**
 * The optional Worker Versioning of the orchestrator worker (DARTFLOW_BUILD_ID, docs/upgrades.md), on the
 * real dev server in a private namespace: without the variable the worker is unversioned (the default,
 * unchanged); with it, the worker joins the `dartflow-orchestrator` deployment, takes tasks once its
 * version is made current, and the history records which build ran each workflow task (AUTO_UPGRADE).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { registerScratchNamespace } from '../../infra/services';
import type { InfraSettings } from '../../infra/settings';
import { connectClient } from '../../infra/temporal-connection';
import {
  createOrchestratorWorker,
  ORCHESTRATOR_DEPLOYMENT,
  orchestratorVersioning,
} from '../../workers/orchestrator-worker';
import { storageProofWorkflow } from '../../workflows';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { testTaskQueue } from '../helpers/temporal';

let settings: InfraSettings;
let client: Client;
let cleanupBucket: () => Promise<void>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  const bucket = await freshBucket('wv');
  cleanupBucket = bucket.cleanup;
  const scratch = await registerScratchNamespace(testSettings(), `dartflow-wv-${uniqueSuffix()}`);
  settings = { ...scratch, s3: { ...scratch.s3, bucket: bucket.store.bucket } };
  client = await connectClient(settings);
});

after(async () => {
  await client?.connection.close();
  await cleanupBucket?.();
});

test('DARTFLOW_BUILD_ID unset: no versioning options (the default worker is unchanged)', () => {
  assert.deepEqual(orchestratorVersioning({}), {});
  assert.deepEqual(orchestratorVersioning({ DARTFLOW_BUILD_ID: '  ' }), {});
  assert.throws(
    () => orchestratorVersioning({ DARTFLOW_BUILD_ID: 'b1', DARTFLOW_DEPLOYMENT_NAME: 'a.b' }),
    /must not contain "\."/
  );
});

test('DARTFLOW_BUILD_ID set: the worker runs workflow tasks as that build once it is the current version', async () => {
  const buildId = `build-${uniqueSuffix()}`;
  const taskQueue = testTaskQueue('orchestrator');
  const worker = await createOrchestratorWorker(settings, {
    taskQueue,
    ...orchestratorVersioning({ DARTFLOW_BUILD_ID: buildId }),
  });
  const history = await worker.runUntil(async () => {
    // The version exists once the worker has polled; until it is current the server sends it nothing.
    const svc = client.workflowService;
    for (let attempt = 1; ; attempt++) {
      try {
        await svc.setWorkerDeploymentCurrentVersion({
          namespace: settings.temporal.namespace,
          deploymentName: ORCHESTRATOR_DEPLOYMENT,
          buildId,
          identity: 'worker-versioning.test',
        });
        break;
      } catch (err) {
        if (attempt >= 60) throw err;
        await sleep(500);
      }
    }
    const handle = await client.workflow.start(storageProofWorkflow, {
      taskQueue,
      workflowId: `wv-proof-${uniqueSuffix()}`,
      args: [{ message: 'worker versioning' }],
    });
    const ref = await handle.result();
    assert.ok(ref.key, 'the workflow completed and wrote its object');
    return handle.fetchHistory();
  });
  const completed = (history.events ?? []).filter(
    (e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
  );
  assert.ok(completed.length >= 1);
  for (const e of completed) {
    const a = e.workflowTaskCompletedEventAttributes!;
    assert.equal(a.deploymentVersion?.buildId, buildId, 'each workflow task ran on the versioned build');
    assert.equal(a.deploymentVersion?.deploymentName, ORCHESTRATOR_DEPLOYMENT);
    assert.equal(a.versioningBehavior, temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE);
  }
});
