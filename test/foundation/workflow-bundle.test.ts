/**
 * The prebuilt orchestrator workflow bundle (workers/workflow-bundle.ts): `npm test` bundles once and every
 * orchestrator worker of the run loads the file. A worker takes it only when it was built from its own
 * project root, and it carries the payload guard's workflow interceptor; an orchestrator worker given the
 * file runs workflows on the real dev server.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@temporalio/client';
import { connectClient } from '../../infra/temporal-connection';
import type { ObjectStore } from '../../storage/object-store';
import { storageProofWorkflow } from '../../workflows';
import { createOrchestratorWorker } from '../../workers/orchestrator-worker';
import {
  orchestratorWorkflowCode,
  prebuiltOrchestratorBundle,
  WORKFLOW_BUNDLE_ENV,
  writeOrchestratorBundle,
} from '../../workers/workflow-bundle';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { testTaskQueue } from '../helpers/temporal';

let dir: string;
let codePath: string;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-bundle-test-'));
  codePath = await writeOrchestratorBundle(dir);
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test("the bundle holds dartflow's workflows and the payload guard's workflow interceptor", () => {
  const code = fs.readFileSync(codePath, 'utf8');
  for (const name of ['campaignWorkflow', 'taskGroupWorkflow', 'trainStepWorkflow', 'modelRolloutWorkflow'])
    assert.ok(code.includes(name), `${name} in the bundle`);
  assert.ok(code.includes('continue-as-new state of'), "the payload guard's interceptor is bundled");
});

test('a worker takes the bundle only when it was built from its own project root', () => {
  assert.equal(prebuiltOrchestratorBundle({ [WORKFLOW_BUNDLE_ENV]: codePath }), codePath);
  assert.deepEqual(orchestratorWorkflowCode({ [WORKFLOW_BUNDLE_ENV]: codePath }), {
    workflowBundle: { codePath },
    workflowInterceptors: false,
  });
  // Unset, missing, or built from another checkout: the worker bundles its own source.
  assert.equal(prebuiltOrchestratorBundle({}), null);
  assert.equal(prebuiltOrchestratorBundle({ [WORKFLOW_BUNDLE_ENV]: path.join(dir, 'missing.js') }), null);
  const other = path.join(dir, 'other.js');
  fs.copyFileSync(codePath, other);
  fs.writeFileSync(`${other}.meta.json`, JSON.stringify({ projectRoot: '/elsewhere/dartflow', builtAt: '' }));
  assert.equal(prebuiltOrchestratorBundle({ [WORKFLOW_BUNDLE_ENV]: other }), null);
  assert.equal(orchestratorWorkflowCode({ [WORKFLOW_BUNDLE_ENV]: other }).workflowInterceptors, true);
});

test('an orchestrator worker given the bundle runs workflows', async () => {
  const settings = testSettings();
  const { store, cleanup }: { store: ObjectStore; cleanup: () => Promise<void> } = await freshBucket('bundle');
  const client: Client = await connectClient(settings);
  const previous = process.env[WORKFLOW_BUNDLE_ENV];
  process.env[WORKFLOW_BUNDLE_ENV] = codePath;
  try {
    const taskQueue = testTaskQueue('orchestrator-bundle');
    const worker = await createOrchestratorWorker(
      { ...settings, s3: { ...settings.s3, bucket: store.bucket } },
      {
        taskQueue,
      }
    );
    const workflowId = `proof-bundle-${uniqueSuffix()}`;
    const ref = await worker.runUntil(
      client.workflow.execute(storageProofWorkflow, { taskQueue, workflowId, args: [{ message: 'bundled' }] })
    );
    assert.equal(ref.key, `proof/${workflowId}.json`);
  } finally {
    if (previous === undefined) delete process.env[WORKFLOW_BUNDLE_ENV];
    else process.env[WORKFLOW_BUNDLE_ENV] = previous;
    await client.connection.close();
    await cleanup();
  }
});
