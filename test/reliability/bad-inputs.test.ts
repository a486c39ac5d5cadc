/**
 * Bad inputs that earlier suites do not cover (or cover without checking that nothing is lost), against
 * the real servers: Chromium task pages that hang, oversized task files, trajectory objects and
 * checkpoints deleted from MinIO under the trainer, NaN in the loss, invalid config at the client, and
 * payloads over Temporal's limits (client start/update, activity result, workflow → activity input).
 * Each case asserts a clear, typed error and what is kept: no reward for a broken episode, the slot
 * recovered, the previous checkpoint current, the rest of the batch trained, no workflow started.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import type { Page } from 'playwright-core';
import { builtinPolicies, createOraclePolicy } from '../../activities/env/policies';
import type { PolicyFactory } from '../../activities/env/policy';
import { runEpisodeCore, type EpisodeHooks } from '../../activities/env/run-episode';
import type { RunEpisodeInput } from '../../activities/env/input';
import {
  ensureInitialCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  writeCheckpoint,
} from '../../activities/trainer/checkpoints';
import { runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainStepInput } from '../../activities/trainer/types';
import { DartflowClient } from '../../client/dartflow-client';
import { ConfigError, parseCampaignConfig } from '../../config/load';
import type { BrowserEnv } from '../../envs/browser/browser-env';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { payloadGuardInterceptors } from '../../infra/payload-guard';
import { connectClient } from '../../infra/temporal-connection';
import { PAYLOAD_GUARD_BYTES, PayloadTooLargeError } from '../../schemas/payload-limits';
import { LedgerEntrySchema, StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask, loadTaskFile, MAX_TASK_FILE_BYTES, parseTaskSpec, TaskConfigError } from '../../tasks';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';
import { writeSyntheticGroups } from '../trainer/fixtures';
import type { CaughtFailure } from './fixtures/payload-workflows';

/** A non-retryable ApplicationFailure of `type` whose message contains every string and matches every pattern. */
function nonRetryableFailure(type: string, ...needles: Array<string | RegExp>): (err: unknown) => boolean {
  return (err) =>
    err instanceof ApplicationFailure &&
    err.type === type &&
    err.nonRetryable === true &&
    needles.every((n) => (typeof n === 'string' ? err.message.includes(n) : n.test(err.message)));
}

let store: ObjectStore;
let cleanup: () => Promise<void>;

before(async () => {
  ({ store, cleanup } = await freshBucket('bad-inputs'));
});
after(async () => {
  await cleanup?.();
});

// ───────────────────────────── task pages that never finish ─────────────────────────────

describe('task pages that never finish', () => {
  let pool: BrowserEnvPool;
  before(() => {
    // A short per-operation deadline so a hang is detected quickly (default 15 s).
    pool = new BrowserEnvPool({ slots: 1, opTimeoutMs: 2000 });
  });
  after(async () => {
    await pool.close();
  });

  const hooks = (): EpisodeHooks => ({ heartbeat: () => undefined, attempt: 1 });
  const input = (policy: string, task = loadTask('click-target')): RunEpisodeInput => ({
    campaignId: 'bad-inputs',
    groupId: 'g-hang',
    trajectoryId: `t-${uniqueSuffix()}`,
    task,
    seed: 11,
    policy: { kind: policy },
  });
  const pageOf = (env: unknown): Page => (env as { page: Page }).page;
  const manifestOf = (inp: RunEpisodeInput) =>
    store.getJson(keys.trajectoryManifest(inp.campaignId, inp.trajectoryId), TrajectoryManifestSchema);

  /** After a hang: a fresh env in the slot plays a normal episode to success. */
  async function slotRecovered(replacedBefore: number): Promise<void> {
    assert.equal(pool.stats().busy, 0, 'slot released');
    assert.equal(pool.stats().replaced, replacedBefore + 1, 'the hung env was replaced');
    const ok = await runEpisodeCore({ pool, store, policies: builtinPolicies() }, input('oracle'), hooks());
    assert.equal(ok.status, 'ok');
    assert.equal(ok.reward, 1);
  }

  test('a page whose script spins forever mid-episode: EnvTimeoutError, no reward, slot recovered', async () => {
    // After the first step the page's main thread enters an endless loop (a task page that hangs).
    const spinning: PolicyFactory = (ctx) => {
      const oracle = createOraclePolicy(ctx);
      return {
        async act(obs, opts) {
          if (obs.step === 1) await pageOf(ctx.env).evaluate('setTimeout(() => { for (;;) {} }, 0)');
          return oracle.act(obs, opts);
        },
      };
    };
    const replaced = pool.stats().replaced;
    const inp = input('spinning', loadTask('tick-checkboxes'));
    const t0 = Date.now();
    await assert.rejects(
      runEpisodeCore({ pool, store, policies: { ...builtinPolicies(), spinning } }, inp, hooks()),
      (err: unknown) =>
        err instanceof ApplicationFailure &&
        err.type === 'EnvTimeoutError' &&
        !err.nonRetryable &&
        /timed out after 2000 ms/.test(err.message)
    );
    assert.ok(Date.now() - t0 < 30_000, 'detected by the op deadline, not by a Temporal timeout');
    const m = await manifestOf(inp);
    assert.equal(m.status, 'env_error');
    assert.equal(m.reward, null, 'a hung page is never a reward (0 would poison GRPO)');
    assert.match(m.error ?? '', /timed out/);
    await slotRecovered(replaced);
  });

  test('a page whose reset() never resolves: EnvTimeoutError at reset, no reward, slot recovered', async () => {
    const env = (await pool.acquire()) as BrowserEnv;
    await env.reset(loadTask('click-target'), 1);
    // Same family: the next reset reuses this page, whose reset now never finishes.
    await pageOf(env).evaluate('globalThis.reset = () => new Promise(() => {})');
    await pool.release(env);
    const replaced = pool.stats().replaced;
    const inp = input('oracle');
    await assert.rejects(
      runEpisodeCore({ pool, store, policies: builtinPolicies() }, inp, hooks()),
      (err: unknown) => err instanceof ApplicationFailure && err.type === 'EnvTimeoutError' && /reset/.test(err.message)
    );
    const m = await manifestOf(inp);
    assert.equal(m.status, 'env_error');
    assert.equal(m.reward, null);
    assert.equal(m.numSteps, 0);
    await slotRecovered(replaced);
  });
});

// ───────────────────────────── task files ─────────────────────────────

test('an oversized task file is refused by name and size before it is parsed; inline specs too', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-tasks-'));
  try {
    const ok = JSON.parse(fs.readFileSync(path.join(__dirname, '../../tasks/defs/click-target.json'), 'utf8'));
    const big = { ...ok, id: 'big-task', instruction: 'click '.repeat(MAX_TASK_FILE_BYTES / 4) };
    const file = path.join(dir, 'big-task.json');
    fs.writeFileSync(file, JSON.stringify(big));
    assert.throws(
      () => loadTaskFile(file),
      (err: unknown) =>
        err instanceof TaskConfigError &&
        err.message.includes(file) &&
        /over the 256\.0 KiB limit for a task file/.test(err.message)
    );
    assert.throws(() => parseTaskSpec(big, 'task of trajectory t1'), /task of trajectory t1: .* over the 256\.0 KiB/);
    // a truncated file (half written) names the file and the JSON problem
    const cut = path.join(dir, 'cut-task.json');
    fs.writeFileSync(cut, JSON.stringify({ ...ok, id: 'cut-task' }).slice(0, 100));
    assert.throws(
      () => loadTaskFile(cut),
      (err: unknown) => err instanceof TaskConfigError && /cut-task\.json: not valid JSON/.test(err.message)
    );
    // the original still loads
    assert.equal(loadTaskFile(path.join(__dirname, '../../tasks/defs/click-target.json')).id, 'click-target');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// ───────────────────────────── trainer: objects deleted under it ─────────────────────────────

describe('trainer inputs deleted or damaged in MinIO', () => {
  const spec = specForWidth(1);
  const trainer = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0 } }).trainer;
  const input = (campaignId: string, groups: TrainStepInput['groups'], over: Partial<TrainStepInput> = {}) => ({
    campaignId,
    trainStep: 1,
    fromVersion: 0,
    groups,
    trainer,
    maxStaleness: 1,
    policy: { seed: 0, width: 1 },
    ...over,
  });
  async function setup(campaignId: string, groups = 4) {
    await ensureInitialCheckpoint(store, campaignId, spec, 0);
    const v0 = await loadCheckpoint(store, campaignId, 0, spec);
    const w = await writeSyntheticGroups(store, spec, v0.weights, {
      campaignId,
      groups,
      perGroup: 4,
      policyVersion: 0,
      seed: 21,
    });
    return w.groups;
  }

  test('a group whose steps or manifest were deleted is skipped and accounted; the rest trains', async () => {
    const campaignId = `del-traj-${uniqueSuffix()}`;
    const groups = await setup(campaignId);
    // group 0: steps.jsonl of one trajectory deleted; group 1: a manifest deleted
    const t0 = groups[0]!.trajectories[1]!;
    await store.remove(keys.trajectorySteps(campaignId, t0.trajectoryId));
    const t1 = groups[1]!.trajectories[0]!;
    await store.remove(t1.manifestKey);
    const result = await runTrainStep({ store }, input(campaignId, groups));
    assert.equal(result.version, 1);
    assert.equal(result.metrics.skippedGroups, 2);
    const ledger = await store.getJson(result.ledgerKey, LedgerEntrySchema);
    assert.deepEqual(
      ledger.skipped?.map((s) => [s.groupId, s.trajectoryId, s.key]),
      [
        [groups[0]!.groupId, t0.trajectoryId, keys.trajectorySteps(campaignId, t0.trajectoryId)],
        [groups[1]!.groupId, t1.trajectoryId, t1.manifestKey],
      ]
    );
    assert.match(ledger.skipped![0]!.reason, /object not found/);
    const consumedGroups = new Set(ledger.consumed.map((c) => c.groupId));
    assert.deepEqual([...consumedGroups].sort(), [groups[2]!.groupId, groups[3]!.groupId].sort());
  });

  test('a deleted screenshot or a truncated steps file skips its group too', async () => {
    const campaignId = `del-shot-${uniqueSuffix()}`;
    const groups = await setup(campaignId, 3);
    const m = await store.getJson(groups[0]!.trajectories[0]!.manifestKey, TrajectoryManifestSchema);
    const [step] = await store.getJsonLines(m.stepsKey, StepRecordSchema);
    await store.remove(step!.observationKey); // shared first frame of group 0
    const m2 = await store.getJson(groups[1]!.trajectories[2]!.manifestKey, TrajectoryManifestSchema);
    const bytes = await store.getBytes(m2.stepsKey);
    await store.client.putObject(store.bucket, m2.stepsKey, bytes.subarray(0, bytes.length - 7)); // truncated
    const result = await runTrainStep({ store }, input(campaignId, groups));
    const ledger = await store.getJson(result.ledgerKey, LedgerEntrySchema);
    assert.deepEqual(
      ledger.skipped?.map((s) => s.groupId),
      [groups[0]!.groupId, groups[1]!.groupId]
    );
    assert.match(ledger.skipped![1]!.reason, /corrupt object .*steps\.jsonl/);
    assert.deepEqual([...new Set(ledger.consumed.map((c) => c.groupId))], [groups[2]!.groupId]);
  });

  test('every group gone: a non-retryable InvalidTrainInput naming the keys; no checkpoint, no ledger', async () => {
    const campaignId = `del-all-${uniqueSuffix()}`;
    const groups = await setup(campaignId, 2);
    for (const g of groups) await store.remove(g.trajectories[0]!.manifestKey);
    await assert.rejects(
      runTrainStep({ store }, input(campaignId, groups)),
      nonRetryableFailure(
        'InvalidTrainInput',
        groups[0]!.trajectories[0]!.manifestKey,
        /previous checkpoint stays current/
      )
    );
    assert.deepEqual(
      (await listCheckpoints(store, campaignId)).map((c) => c.version),
      [0]
    );
    assert.equal(await store.exists(keys.ledgerEntry(campaignId, 1)), false);
  });

  test('a deleted or truncated checkpoint: non-retryable CheckpointUnavailableError naming the object', async () => {
    const campaignId = `del-ckpt-${uniqueSuffix()}`;
    const groups = await setup(campaignId, 2);
    const v0 = await loadCheckpoint(store, campaignId, 0, spec);
    await writeCheckpoint(store, { campaignId, version: 1, parentVersion: 0, spec, weights: v0.weights });
    // v1's weights deleted
    await store.remove(keys.checkpointWeights(campaignId, 1));
    await assert.rejects(
      runTrainStep({ store }, input(campaignId, groups, { fromVersion: 1 })),
      nonRetryableFailure(
        'CheckpointUnavailableError',
        keys.checkpointWeights(campaignId, 1),
        /current checkpoint v1 .* is missing.*dartflow campaign pin/
      )
    );
    // v0's manifest truncated, and a step from v0 (v1 above it is listed and read by the commit first)
    const mkey = keys.checkpointManifest(campaignId, 0);
    const bytes = await store.getBytes(mkey);
    await store.client.putObject(store.bucket, mkey, bytes.subarray(0, 40));
    await assert.rejects(
      runTrainStep({ store }, input(campaignId, groups, { fromVersion: 0 })),
      nonRetryableFailure('CheckpointUnavailableError', mkey, /not valid JSON/)
    );
    assert.equal(await store.exists(keys.ledgerEntry(campaignId, 1)), false, 'nothing committed');
    assert.equal(await store.exists(keys.checkpointManifest(campaignId, 2)), false, 'no new version');
  });

  test('NaN in the loss (weights that overflow the forward pass): NonFiniteLossError, previous checkpoint kept', async () => {
    const campaignId = `nan-loss-${uniqueSuffix()}`;
    const groups = await setup(campaignId, 2);
    const v0 = await loadCheckpoint(store, campaignId, 0, spec);
    // Finite weights (they pass the checkpoint's NaN check) that overflow float32 in the forward pass.
    const huge = Object.fromEntries(Object.entries(v0.weights).map(([k, v]) => [k, v.map((x) => x * 1e30)]));
    await writeCheckpoint(store, { campaignId, version: 1, parentVersion: 0, spec, weights: huge });
    await assert.rejects(
      runTrainStep({ store }, input(campaignId, groups, { fromVersion: 1 })),
      nonRetryableFailure('NonFiniteLossError', /previous checkpoint kept: .*not finite/)
    );
    assert.deepEqual(
      (await listCheckpoints(store, campaignId)).map((c) => c.version),
      [0, 1],
      'no version written from the NaN step'
    );
    assert.equal(await store.exists(keys.ledgerEntry(campaignId, 1)), false);
  });
});

// ───────────────────────────── config and Temporal payload limits ─────────────────────────────

describe('invalid config and payloads over Temporal limits (real dev server)', () => {
  const settings = testSettings();
  let client: Client;
  let dartflow: DartflowClient;
  let worker: Worker;
  let running: Promise<void>;
  const taskQueue = testTaskQueue('payload');
  const calls = { bigResult: 0 };

  before(async () => {
    client = await connectClient(settings);
    dartflow = await DartflowClient.connect(settings);
    worker = await createTestWorker(settings, {
      taskQueue,
      workflowsPath: require.resolve('./fixtures/payload-workflows'),
      activities: {
        async bigResult(bytes: number) {
          calls.bigResult++;
          return 'r'.repeat(bytes);
        },
        async echoLength(s: string) {
          return s.length;
        },
      },
      interceptors: payloadGuardInterceptors({ workflows: true }),
    });
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await dartflow?.close();
    await client?.connection.close();
  });

  test('an invalid config value names the field and the fix, and starts no workflow', async () => {
    const id = `bad-config-${uniqueSuffix()}`;
    await assert.rejects(
      dartflow.startCampaign({ campaign: { id }, trainer: { clipLow: -0.5 } }),
      (err: unknown) => err instanceof ConfigError && /trainer\.clipLow: got -0\.5/.test(err.message)
    );
    await assert.rejects(
      dartflow.startCampaign({ campaign: { id }, rollout: { nMax: 'many' } } as never),
      (err: unknown) => err instanceof ConfigError && /rollout\.nMax/.test(err.message)
    );
    await assert.rejects(dartflow.getCampaign(id).handle.describe(), WorkflowNotFoundError);
  });

  test('a workflow input over the limit is refused by the client before sending; nothing is started', async () => {
    const workflowId = `big-input-${uniqueSuffix()}`;
    await assert.rejects(
      client.workflow.start('waitForPokeWorkflow', {
        taskQueue,
        workflowId,
        args: ['x'.repeat(PAYLOAD_GUARD_BYTES + 1)],
      }),
      (err: unknown) =>
        err instanceof PayloadTooLargeError &&
        err.message.includes(`input of workflow waitForPokeWorkflow (${workflowId})`) &&
        /over dartflow's 1\.94 MiB limit .*2\.00 MiB.*ObjectRef/.test(err.message)
    );
    await assert.rejects(client.workflow.getHandle(workflowId).describe(), WorkflowNotFoundError);
  });

  test('an update over the limit is refused by the client; the workflow keeps running and accepts a normal one', async () => {
    const handle = await client.workflow.start('waitForPokeWorkflow', {
      taskQueue,
      workflowId: `poke-${uniqueSuffix()}`,
    });
    await assert.rejects(
      handle.executeUpdate('poke', { args: ['y'.repeat(3 * 1024 * 1024)] }),
      (err: unknown) => err instanceof PayloadTooLargeError && /update poke to poke-/.test(err.message)
    );
    assert.equal((await handle.describe()).status.name, 'RUNNING');
    assert.equal(await handle.executeUpdate('poke', { args: ['abc'] }), 3);
    assert.equal(await handle.result(), 3);
  });

  test('an activity result over the limit fails once, non-retryably, with PayloadTooLargeError', async () => {
    const out = await client.workflow.execute('bigResultWorkflow', {
      taskQueue,
      workflowId: `big-result-${uniqueSuffix()}`,
      args: [PAYLOAD_GUARD_BYTES + 10],
    });
    const caught = out as CaughtFailure;
    assert.equal(caught.type, 'PayloadTooLargeError');
    assert.equal(caught.nonRetryable, true);
    assert.match(caught.message, /result of activity bigResult is 1\.94 MiB/);
    assert.equal(calls.bigResult, 1, 'not retried: the same bytes would come back');
    // a result under the limit passes through
    const small = (await client.workflow.execute('bigResultWorkflow', {
      taskQueue,
      workflowId: `small-result-${uniqueSuffix()}`,
      args: [1000],
    })) as CaughtFailure;
    assert.equal(small.message, 'no error');
  });

  test('a workflow scheduling an activity with an oversized input gets the error at the call site', async () => {
    const out = (await client.workflow.execute('bigInputWorkflow', {
      taskQueue,
      workflowId: `big-act-input-${uniqueSuffix()}`,
      args: [PAYLOAD_GUARD_BYTES + 100],
    })) as CaughtFailure;
    assert.equal(out.type, 'PayloadTooLargeError');
    assert.match(out.message, /input of activity echoLength is 1\.94 MiB/);
  });

  test('a signal over the limit is refused too', async () => {
    const handle = await client.workflow.start('waitForPokeWorkflow', {
      taskQueue,
      workflowId: `sig-${uniqueSuffix()}`,
    });
    await assert.rejects(handle.signal('nothing', 'z'.repeat(PAYLOAD_GUARD_BYTES + 1)), PayloadTooLargeError);
    await handle.executeUpdate('poke', { args: [''] });
    assert.equal(await handle.result(), 0);
  });

  test('errors from the server are still reported when the guard is not in the way', async () => {
    // Sanity: an update the workflow does not know is a normal WorkflowUpdateFailedError, not our guard.
    const handle = await client.workflow.start('waitForPokeWorkflow', {
      taskQueue,
      workflowId: `unknown-update-${uniqueSuffix()}`,
    });
    await assert.rejects(handle.executeUpdate('nope', { args: [] }), WorkflowUpdateFailedError);
    await handle.executeUpdate('poke', { args: ['x'] });
  });
});
