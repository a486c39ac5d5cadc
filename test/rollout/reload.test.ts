/**
 * Per-server model sync through Temporal: a workflow calls reloadPolicy on one policy server's private
 * task queue (real worker, real ORT session, real MinIO) while env-side clients keep acting. No act call
 * may fail during the roll, every answer names the version that produced it, the other server keeps
 * its version, and a corrupt checkpoint fails the activity non-retryably while the old version serves on.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import { createCampaignDataActivities } from '../../activities/data/campaign-data';
import { connectClient } from '../../infra/temporal-connection';
import { defaultPolicySpec } from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import { writeCheckpoint, writeInitialCheckpoint } from '../../rollout/checkpoint';
import { PolicyServerClient, type PolicyAnswer } from '../../rollout/client';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { startPolicyServer, type PolicyServerHandle } from '../../workers/policy-server';
import { freshBucket, testSettings } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';
import { observation, TEST_TOKEN } from './helpers';
import type { reloadPolicyOn } from './fixtures/policy-workflows';

const CAMPAIGN = 'roll';
const spec = defaultPolicySpec;
const settings = testSettings();

describe('reloadPolicy through a real Temporal worker', () => {
  let store: ObjectStore;
  let cleanup: () => Promise<void>;
  let a: PolicyServerHandle;
  let b: PolicyServerHandle;
  let wfWorker: Worker;
  let wfRunning: Promise<void>;
  let wfQueue: string;
  let client: Client;

  const reload = (taskQueue: string, version: number) =>
    client.workflow.execute<typeof reloadPolicyOn>('reloadPolicyOn', {
      taskQueue: wfQueue,
      workflowId: `${wfQueue}-reload-${taskQueue}-v${version}-${Date.now()}`,
      args: [taskQueue, CAMPAIGN, version],
      workflowExecutionTimeout: '2 minutes',
    });

  before(async () => {
    ({ store, cleanup } = await freshBucket('policy-roll'));
    await writeInitialCheckpoint(store, CAMPAIGN, spec, 1);
    await writeCheckpoint(store, CAMPAIGN, 1, spec, initWeights(spec, 2));
    const common = {
      settings,
      store,
      token: TEST_TOKEN,
      spec,
      maxBatch: 8,
      maxWaitMs: 2,
      initial: { campaignId: CAMPAIGN, version: 0 },
    };
    a = await startPolicyServer({ ...common, serverId: 'roll-a', taskQueue: testTaskQueue('policy-roll-a') });
    b = await startPolicyServer({ ...common, serverId: 'roll-b', taskQueue: testTaskQueue('policy-roll-b') });
    wfQueue = testTaskQueue('policy-roll-wf');
    wfWorker = await createTestWorker(settings, {
      taskQueue: wfQueue,
      workflowsPath: path.join(__dirname, 'fixtures', 'policy-workflows.ts'),
    });
    wfRunning = wfWorker.run();
    client = await connectClient(settings);
  });

  after(async () => {
    if (wfWorker?.getState() === 'RUNNING') wfWorker.shutdown();
    await wfRunning?.catch(() => undefined);
    await a?.shutdown();
    await b?.shutdown();
    await client?.connection.close();
    await cleanup?.();
  });

  it('rolls server A from v0 to v1 while concurrent act() calls keep succeeding; B stays on v0', async () => {
    const toA = new PolicyServerClient({ endpoints: [a.url], token: TEST_TOKEN, maxAttempts: 1 });
    let phase: 'before' | 'during' | 'after' = 'before';
    const seen: Array<{ phase: string; answer: PolicyAnswer }> = [];
    const failures: unknown[] = [];
    let stop = false;
    // Four env-like loops acting back to back against A for the whole roll.
    const loops = Array.from({ length: 4 }, async (_, k) => {
      for (let i = 0; !stop; i++) {
        const at = phase;
        try {
          seen.push({
            phase: at,
            answer: await toA.act({ observation: observation(k * 1000 + (i % 50)), seed: i, temperature: 1 }),
          });
        } catch (err) {
          failures.push(err);
        }
      }
    });
    while (seen.length < 20) await new Promise((r) => setTimeout(r, 5));
    phase = 'during';
    const { reload: r, health } = await reload(a.taskQueue, 1);
    phase = 'after';
    const afterStart = seen.length;
    while (seen.length < afterStart + 20) await new Promise((r) => setTimeout(r, 5));
    stop = true;
    await Promise.all(loops);

    assert.deepEqual(failures, [], 'no act() failed during the reload');
    assert.equal(r.serverId, 'roll-a');
    assert.equal(r.version, 1);
    assert.equal(r.previousVersion, 0);
    assert.equal(health.version, 1);
    assert.equal(health.url, a.url);
    assert.ok(seen.filter((s) => s.phase === 'before').every((s) => s.answer.policyVersion === 0));
    // Requests sent after the activity completed are answered by v1 (a batch captures its model when it starts).
    const afterAnswers = seen.filter((s) => s.phase === 'after');
    assert.ok(afterAnswers.length > 0 && afterAnswers.every((s) => s.answer.policyVersion === 1));
    assert.ok(seen.every((s) => s.answer.serverId === 'roll-a'));

    const toB = new PolicyServerClient({ endpoints: [b.url], token: TEST_TOKEN });
    assert.equal((await toB.act({ observation: observation(1), seed: 1 })).policyVersion, 0);
    assert.equal((await toB.health(b.url)).version, 0);
  });

  it('both servers announce their URL in the registry campaigns read', async () => {
    const data = createCampaignDataActivities({ store });
    let servers = await data.listPolicyServers({});
    // The first announcement is written right after start; poll briefly in case it is still in flight.
    for (let i = 0; i < 100 && servers.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 20));
      servers = await data.listPolicyServers({});
    }
    assert.deepEqual(servers, [
      { serverId: 'roll-a', url: a.url },
      { serverId: 'roll-b', url: b.url },
    ]);
  });

  it('is idempotent: reloading the served version is a no-op', async () => {
    const { reload: r } = await reload(a.taskQueue, 1);
    assert.equal(r.unchanged, true);
    assert.equal(r.version, 1);
  });

  it('fails non-retryably on a corrupt checkpoint and keeps serving the old version', async () => {
    // v2: a manifest pointing at weights that were truncated in the store.
    const good = await writeCheckpoint(store, CAMPAIGN, 2, spec, initWeights(spec, 3));
    const bytes = await store.getBytes(good.weights.key);
    await store.putBytes(keys.checkpointWeights(CAMPAIGN, 2), bytes.subarray(0, bytes.length - 100));
    await assert.rejects(reload(a.taskQueue, 2), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      const act = err.cause;
      assert.ok(act instanceof ActivityFailure);
      const app = act.cause;
      assert.ok(app instanceof ApplicationFailure);
      assert.equal(app.type, 'CheckpointRejectedError');
      assert.equal(app.nonRetryable, true);
      assert.match(app.message, /v2 refused \(corrupt\)/);
      assert.deepEqual(app.details?.[0], { reason: 'corrupt', campaignId: CAMPAIGN, version: 2 });
      return true;
    });
    const toA = new PolicyServerClient({ endpoints: [a.url], token: TEST_TOKEN });
    assert.equal((await toA.act({ observation: observation(2), seed: 2 })).policyVersion, 1);
    const h = await toA.health(a.url);
    assert.equal(h.version, 1);
    assert.match(h.lastReloadError ?? '', /corrupt/);
  });
});
