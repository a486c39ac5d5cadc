/** The stack end to end on real Temporal dev servers: proof workflow, search attributes, restart survival. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@temporalio/client';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createProofActivities } from '../../activities/data/proof';
import { startTemporalDevServer, stopService, temporalHealthy } from '../../infra/services';
import { connectClient } from '../../infra/temporal-connection';
import { SEARCH_ATTRIBUTE_CLI_TYPES } from '../../schemas/search-attributes';
import type { ObjectStore } from '../../storage/object-store';
import { storageProofWorkflow } from '../../workflows';
import { freePort, freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const settings = testSettings();
let client: Client;
let store: ObjectStore;
let cleanup: () => Promise<void>;
let bundle: WorkflowBundleWithSourceMap;

before(async () => {
  client = await connectClient(settings);
  ({ store, cleanup } = await freshBucket('temporal'));
  bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: undefined });
});
after(async () => {
  await client.connection.close();
  await cleanup();
});

async function runProof(c: Client, s = settings, taskQueue = testTaskQueue('orchestrator')) {
  const worker = await createTestWorker(s, {
    taskQueue,
    workflowBundle: bundle,
    activities: createProofActivities({ store }),
  });
  const workflowId = `proof-${uniqueSuffix()}`;
  const ref = await worker.runUntil(
    c.workflow.execute(storageProofWorkflow, { taskQueue, workflowId, args: [{ message: 'hello dartflow' }] })
  );
  return { ref, workflowId };
}

test('proof workflow: an activity on the orchestrator worker writes to MinIO and returns the key', async () => {
  const { ref, workflowId } = await runProof(client);
  assert.equal(ref.key, `proof/${workflowId}.json`);
  assert.equal(ref.bucket, store.bucket);
  const body = JSON.parse((await store.getBytes(ref.key, ref.sha256)).toString()) as {
    message: string;
    workflowId: string;
  };
  assert.equal(body.message, 'hello dartflow');
  assert.equal(body.workflowId, workflowId);
});

test("dartflow's search attributes are registered on the dev server", async () => {
  const res = await client.connection.operatorService.listSearchAttributes({ namespace: settings.temporal.namespace });
  for (const name of Object.keys(SEARCH_ATTRIBUTE_CLI_TYPES))
    assert.ok(name in (res.customAttributes ?? {}), `${name} registered`);
});

test('a finished workflow history survives a kill -9 of the dev server and a restart on the same SQLite file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-restart-'));
  const port = await freePort();
  const uiPort = await freePort();
  const instanceName = `temporal-restart-test-${uniqueSuffix()}`;
  const opts = { port, uiPort, dbFile: path.join(dir, 'history.sqlite'), namespace: 'default', instanceName };
  const local = {
    ...settings,
    dataDir: dir,
    temporal: { ...settings.temporal, address: `127.0.0.1:${port}`, external: false },
  };
  try {
    const first = await startTemporalDevServer(local, opts);
    assert.equal(first.reused, false);
    const c1 = await connectClient(local);
    const { workflowId } = await runProof(c1, local);
    await c1.connection.close();
    // The history database runs in WAL mode (infra's SQLite pragmas); a commit must survive a crash.
    assert.ok(fs.existsSync(`${opts.dbFile}-wal`), 'the dev server writes a SQLite write-ahead log');

    assert.ok(first.pid, 'a started server has a pid');
    process.kill(first.pid, 'SIGKILL');
    for (let i = 0; i < 60 && (await temporalHealthy(local.temporal.address, 500)); i++) await sleep(500);
    assert.equal(await temporalHealthy(local.temporal.address, 1000), false, 'server is down after kill -9');

    const second = await startTemporalDevServer(local, opts);
    assert.equal(second.reused, false);
    assert.notEqual(second.pid, first.pid);
    const c2 = await connectClient(local);
    const desc = await c2.workflow.getHandle(workflowId).describe();
    assert.equal(desc.status.name, 'COMPLETED');
    const history = await c2.workflow.getHandle(workflowId).fetchHistory();
    const types = (history.events ?? []).map((e) => e.eventType);
    assert.ok(types.length >= 10, `full history kept (${types.length} events)`);
    await c2.connection.close();

    // Starting again while it runs reuses it.
    const third = await startTemporalDevServer(local, opts);
    assert.equal(third.reused, true);
  } finally {
    await stopService(local, instanceName, 'start-dev');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
