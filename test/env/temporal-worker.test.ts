/**
 * runEpisode through a real Temporal worker on the local dev server (unique task queue per run):
 * success, retry on a fresh env after a crash, non-retryable bad task, cancellation that frees the slot,
 * a reset longer than the heartbeat timeout that runs once (kept alive, not retried on a second env), and
 * an episode that hands its env to the next one before writing its records.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { createOraclePolicy } from '../../activities/env/policies';
import type { PolicyFactory } from '../../activities/env/policy';
import type { RunEpisodeInput } from '../../activities/env/input';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { EnvCrashedError } from '../../envs/errors';
import { SIM_PROFILES, SimulatedEnvPool } from '../../envs/simulated';
import { loadInfraSettings } from '../../infra/settings';
import { connectClient, connectWorker } from '../../infra/temporal-connection';
import { TrajectoryManifestSchema } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { activitySlotsFor, createEnvWorker, type EnvWorkerHandle } from '../../workers/env-worker';
import { throwawayStore } from './helpers';
import { waitFor } from '../helpers/wait';

const settings = loadInfraSettings();
const suffix = Math.random().toString(36).slice(2, 10);
const envQueue = `env-test-${suffix}`;
const simQueue = `env-test-sim-${suffix}`;
const wfQueue = `env-test-wf-${suffix}`;
const slowResetQueue = `env-test-slow-reset-${suffix}`;
const slowWriteQueue = `env-test-slow-write-${suffix}`;
/** How long the slow-write worker's store takes to store an episode's steps.jsonl. */
const STEPS_WRITE_DELAY_MS = 5_000;

let store: ObjectStore;
let drop: () => Promise<void>;
let client: Client;
let envWorker: EnvWorkerHandle;
let simWorker: EnvWorkerHandle;
let slowResetWorker: EnvWorkerHandle;
let slowWriteWorker: EnvWorkerHandle;
let wfWorker: Worker;
const running: Promise<void>[] = [];
let crashesLeft = 1;

// Throws an env crash from inside the episode once: the retry must run on a fresh env and succeed.
const crashOnce: PolicyFactory = (ctx) => {
  const oracle = createOraclePolicy(ctx);
  return {
    async act(obs, opts) {
      if (crashesLeft > 0) {
        crashesLeft--;
        throw new EnvCrashedError('injected crash', ctx.env.id);
      }
      return oracle.act(obs, opts);
    },
  };
};
const slow: PolicyFactory = () => ({
  async act() {
    await new Promise((r) => setTimeout(r, 100));
    return { action: { type: 'wait' }, actionText: 'wait()', logProb: 0, entropy: 0, policyVersion: 0 };
  },
});

before(async () => {
  ({ store, drop } = await throwawayStore());
  envWorker = await createEnvWorker({
    settings,
    store,
    taskQueue: envQueue,
    pool: new BrowserEnvPool({ slots: 1 }),
    policies: { crashOnce },
  });
  simWorker = await createEnvWorker({
    settings,
    store,
    taskQueue: simQueue,
    pool: new SimulatedEnvPool({ slots: 1, profile: SIM_PROFILES.fast! }),
    policies: { slow },
  });
  // Resets take 20 s, twice the 10-s heartbeat timeout of the test below (as OSWorld resets outlast a minute).
  slowResetWorker = await createEnvWorker({
    settings,
    store,
    taskQueue: slowResetQueue,
    pool: new SimulatedEnvPool({
      slots: 2,
      profile: { ...SIM_PROFILES.fast!, name: 'slow-reset', reset: { medianMs: 20_000, sigma: 0 } },
    }),
    policies: { slow },
  });
  // One env; the store takes 5 s to store an episode's steps (a busy MinIO): the episode writing its records
  // must not keep the next one from its env.
  const slowWrites = new Proxy(store, {
    get(target, prop) {
      if (prop === 'putBytes')
        return async (key: string, data: Uint8Array, contentType?: string) => {
          if (key.endsWith('steps.jsonl')) await new Promise((r) => setTimeout(r, STEPS_WRITE_DELAY_MS));
          return target.putBytes(key, data, contentType);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  slowWriteWorker = await createEnvWorker({
    settings,
    store: slowWrites,
    taskQueue: slowWriteQueue,
    // A browser pool: the kind that takes episodes beyond its envs (activitySlotsFor).
    pool: new BrowserEnvPool({ slots: 1 }),
    policies: { slow },
  });
  wfWorker = await Worker.create({
    connection: await connectWorker(settings),
    namespace: settings.temporal.namespace,
    taskQueue: wfQueue,
    workflowsPath: path.join(__dirname, 'fixtures', 'episode-workflow.ts'),
  });
  running.push(envWorker.run(), simWorker.run(), slowResetWorker.run(), slowWriteWorker.run(), wfWorker.run());
  client = await connectClient(settings);
});

after(async () => {
  envWorker.shutdown();
  simWorker.shutdown();
  slowResetWorker.shutdown();
  slowWriteWorker.shutdown();
  wfWorker.shutdown();
  await Promise.all(running);
  await client.connection.close();
  await drop();
});

const input = (over: Partial<RunEpisodeInput> = {}): RunEpisodeInput => ({
  campaignId: 'temporal-test',
  groupId: 'g',
  trajectoryId: `t-${Math.random().toString(36).slice(2, 10)}`,
  task: loadTask('pick-menu'),
  seed: 11,
  policy: { kind: 'oracle' },
  ...over,
});

const run = (inp: RunEpisodeInput, queue = envQueue, heartbeatTimeoutMs?: number) =>
  client.workflow.execute('episodeTestWorkflow', {
    taskQueue: wfQueue,
    workflowId: `env-test-${inp.trajectoryId}`,
    args: [inp, queue, ...(heartbeatTimeoutMs !== undefined ? [heartbeatTimeoutMs] : [])],
  });

test('runEpisode runs on a real worker and writes the trajectory', async () => {
  const res = await run(input());
  assert.equal(res.status, 'ok');
  assert.equal(res.reward, 1);
  assert.equal(res.numSteps, 2);
  const m = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
  assert.equal(m.reward, 1);
});

test('an env crash is retried on a fresh env; the retry overwrites the failed attempt', async () => {
  crashesLeft = 1;
  const before = envWorker.pool.stats().replaced;
  const res = await run(input({ policy: { kind: 'crashOnce' } }));
  assert.equal(res.reward, 1);
  assert.equal(envWorker.pool.stats().replaced, before + 1);
  const m = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
  assert.equal(m.status, 'ok');
});

test('a bad task fails the activity once, non-retryably, with TaskConfigError', async () => {
  const inp = input({ task: { ...loadTask('pick-menu'), maxSteps: 0 } });
  await assert.rejects(run(inp), (err: unknown) => {
    assert.ok(err instanceof WorkflowFailedError);
    const act = err.cause;
    assert.ok(act instanceof ActivityFailure);
    assert.ok(act.cause instanceof ApplicationFailure);
    assert.equal(act.cause.type, 'TaskConfigError');
    assert.equal(act.cause.nonRetryable, true);
    assert.match(act.cause.message, /field "maxSteps"/);
    return true;
  });
  const hist = await client.workflow.getHandle(`env-test-${inp.trajectoryId}`).fetchHistory();
  const scheduled = (hist.events ?? []).filter((e) => e.activityTaskStartedEventAttributes);
  assert.equal(scheduled.length, 1, 'no retry of a bad task');
});

test('cancelling the workflow cancels the episode and frees the slot', async () => {
  const inp = input({ policy: { kind: 'slow' }, maxSteps: 1000 });
  const handle = await client.workflow.start('episodeTestWorkflow', {
    taskQueue: wfQueue,
    workflowId: `env-test-${inp.trajectoryId}`,
    args: [inp, simQueue],
  });
  for (let i = 0; i < 200 && simWorker.pool.stats().busy === 0; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(simWorker.pool.stats().busy, 1, 'the episode is running');
  await handle.cancel();
  await assert.rejects(
    handle.result(),
    (err: unknown) => err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure
  );
  for (let i = 0; i < 400 && simWorker.pool.stats().busy > 0; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(simWorker.pool.stats().busy, 0, 'the slot was released');
  // The env goes back before the failure record is written: the record follows.
  const m = await waitFor(
    "the cancelled attempt's record",
    () =>
      store.getJson(`campaigns/temporal-test/trajectories/${inp.trajectoryId}/manifest.json`, TrajectoryManifestSchema),
    30_000
  );
  assert.equal(m.status, 'cancelled');
  assert.equal(m.reward, null);
});

test('a reset longer than the heartbeat timeout runs once: the attempt is kept alive, not retried on a second env', async () => {
  const inp = input({ policy: { kind: 'slow' }, maxSteps: 1 });
  let mostBusy = 0;
  const sampler = setInterval(() => (mostBusy = Math.max(mostBusy, slowResetWorker.pool.stats().busy)), 50);
  try {
    // 10 s: the SDK sends the kept-alive heartbeat every 8 s, 2 s of margin for a loaded dev server.
    const res = await run(inp, slowResetQueue, 10_000);
    assert.equal(res.status, 'ok');
  } finally {
    clearInterval(sampler);
  }
  const hist = await client.workflow.getHandle(`env-test-${inp.trajectoryId}`).fetchHistory();
  const started = (hist.events ?? []).flatMap((e) =>
    e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes] : []
  );
  // Temporal records ActivityTaskStarted once, for the attempt that closed; its number says whether any timed out.
  assert.equal(started[0]?.attempt, 1, 'the first attempt completed (no heartbeat timeout)');
  assert.equal(mostBusy, 1, 'one env held: no second attempt ran beside the first');
  const m = await store.getJson(
    `campaigns/temporal-test/trajectories/${inp.trajectoryId}/manifest.json`,
    TrajectoryManifestSchema
  );
  assert.equal(m.status, 'ok');
  assert.match(m.stepsKey, /\/steps\.jsonl$/, 'the first attempt wrote the trajectory');
});

test('an episode hands its env back before writing its records: the next episode starts while it writes', async () => {
  // Two episodes on one env; the first to get it writes its steps for 5 s.
  const episodes = [input({ policy: { kind: 'slow' }, maxSteps: 3 }), input({ policy: { kind: 'slow' }, maxSteps: 3 })];
  const results = await Promise.all(episodes.map((e) => run(e, slowWriteQueue)));
  for (const r of results) assert.equal(r.status, 'ok');
  const timings = await Promise.all(
    results.map(async (r) => (await store.getJson(r.manifestKey, TrajectoryManifestSchema)).timing!)
  );
  const [first, second] = timings.sort((a, b) => a.acquiredAt - b.acquiredAt);
  // Before: the second episode got the env only after the first's records were stored (≥ 5 s after the
  // first began writing), because the env went back after the writes and the worker ran one episode per env.
  // 3 s leaves room for the second episode's dispatch on a loaded machine.
  const waited = second!.acquiredAt - first!.writeStartedAt;
  assert.ok(waited < 3_000, `second episode got the env ${waited} ms after the first began writing`);
  assert.equal(slowWriteWorker.pool.stats().busy, 0, 'the env is free again');
});

test('a browser env worker takes a quarter more episodes than envs, at most 16 more; other kinds none', () => {
  const browser = [1, 4, 8, 64, 1024].map((slots) => activitySlotsFor({ kind: 'browser', slots }));
  assert.deepEqual(browser, [2, 5, 10, 80, 1040]);
  for (const kind of ['osworld', 'remote', 'simulated']) assert.equal(activitySlotsFor({ kind, slots: 8 }), 8);
});
