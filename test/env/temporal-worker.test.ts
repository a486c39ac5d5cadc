/**
 * runEpisode through a real Temporal worker on the local dev server (unique task queue per run):
 * success, retry on a fresh env after a crash, non-retryable bad task, cancellation that frees the slot,
 * and a reset longer than the heartbeat timeout that runs once (kept alive, not retried on a second env).
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
import { createEnvWorker, type EnvWorkerHandle } from '../../workers/env-worker';
import { throwawayStore } from './helpers';

const settings = loadInfraSettings();
const suffix = Math.random().toString(36).slice(2, 10);
const envQueue = `env-test-${suffix}`;
const simQueue = `env-test-sim-${suffix}`;
const wfQueue = `env-test-wf-${suffix}`;
const slowResetQueue = `env-test-slow-reset-${suffix}`;

let store: ObjectStore;
let drop: () => Promise<void>;
let client: Client;
let envWorker: EnvWorkerHandle;
let simWorker: EnvWorkerHandle;
let slowResetWorker: EnvWorkerHandle;
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
  wfWorker = await Worker.create({
    connection: await connectWorker(settings),
    namespace: settings.temporal.namespace,
    taskQueue: wfQueue,
    workflowsPath: path.join(__dirname, 'fixtures', 'episode-workflow.ts'),
  });
  running.push(envWorker.run(), simWorker.run(), slowResetWorker.run(), wfWorker.run());
  client = await connectClient(settings);
});

after(async () => {
  envWorker.shutdown();
  simWorker.shutdown();
  slowResetWorker.shutdown();
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
  const m = await store.getJson(
    `campaigns/temporal-test/trajectories/${inp.trajectoryId}/manifest.json`,
    TrajectoryManifestSchema
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
