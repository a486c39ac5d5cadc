/**
 * Two attempts of one episode (a retry, and the attempt whose heartbeat timed out but which still runs)
 * both write the trajectory. Real Chromium and a real MinIO (throwaway bucket): the first ok manifest is
 * final, each attempt's steps object is its own, and every attempt reports exactly what is stored.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { commitManifest } from '../../activities/env/manifest-commit';
import { builtinPolicies } from '../../activities/env/policies';
import type { PolicyFactory } from '../../activities/env/policy';
import { runEpisodeCore, type EnvActivityDeps } from '../../activities/env/run-episode';
import type { RunEpisodeInput } from '../../activities/env/input';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { StepRecordSchema, TrajectoryManifestSchema, type TrajectoryManifest } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { throwawayStore } from './helpers';

let store: ObjectStore;
let drop: () => Promise<void>;
let pool: BrowserEnvPool;

before(async () => {
  ({ store, drop } = await throwawayStore('test-attempts-'));
  pool = new BrowserEnvPool({ slots: 1 });
});
after(async () => {
  await pool.close();
  await drop();
});

/** Waits every step: the episode ends unsolved (reward 0), unlike the oracle's (reward 1). */
const idle: PolicyFactory = () => ({
  act: async () => ({ action: { type: 'wait' }, actionText: 'wait()', logProb: 0, entropy: 0, policyVersion: 0 }),
});

const deps = (): EnvActivityDeps => ({ pool, store, policies: { ...builtinPolicies(), idle } });

const episode = (trajectoryId: string, kind: string): RunEpisodeInput => ({
  campaignId: 'attempts',
  groupId: 'g1',
  trajectoryId,
  task: loadTask('tick-checkboxes'),
  seed: 3,
  // The idle policy's episodes stop early; the oracle gets the task's own budget.
  ...(kind === 'idle' ? { maxSteps: 3 } : {}),
  policy: { kind },
});

const noBeats = (attempt: number) => ({ heartbeat: () => undefined, attempt });

test('an attempt that finishes after the retry committed reports the stored trajectory, not its own', async () => {
  const id = 'late-zombie';
  // Attempt 2 (the retry) finishes first, solved; then attempt 1, which Temporal had given up on, finishes
  // unsolved. Before the commit rule it overwrote the manifest: the stored reward was no longer the one
  // the group had reported.
  const retry = await runEpisodeCore(deps(), episode(id, 'oracle'), noBeats(2));
  const zombie = await runEpisodeCore(deps(), episode(id, 'idle'), noBeats(1));
  assert.equal(retry.reward, 1);
  assert.equal(zombie.reward, 1, 'the late attempt reports the committed episode');
  assert.equal(zombie.numSteps, retry.numSteps);

  const stored = await store.getJson(keys.trajectoryManifest('attempts', id), TrajectoryManifestSchema);
  assert.equal(stored.reward, 1);
  assert.equal(stored.stepsKey, keys.trajectorySteps('attempts', id, 2));
  // The winner's steps are intact (sha256 as recorded); the late attempt's went to its own object.
  const steps = await store.getJsonLines(stored.stepsKey, StepRecordSchema, stored.stepsSha256);
  assert.equal(steps.length, stored.numSteps);
  assert.ok(await store.exists(keys.trajectorySteps('attempts', id, 1)));
  assert.notEqual(keys.trajectorySteps('attempts', id, 1), stored.stepsKey);
  // Benchmarks tell a kept retry from a first attempt by its steps key.
  assert.equal(keys.attemptOfStepsKey(stored.stepsKey), 2);
  assert.equal(keys.attemptOfStepsKey(keys.trajectorySteps('attempts', id, 1)), 1);
  assert.equal(keys.attemptOfStepsKey(keys.trajectorySteps('attempts', id, 12)), 12);
});

test('a failed attempt leaves a record that the next ok attempt replaces', async () => {
  const id = 'failed-then-ok';
  const broken: PolicyFactory = () => ({
    act: async () => {
      throw new Error('policy crashed');
    },
  });
  await assert.rejects(
    runEpisodeCore({ ...deps(), policies: { ...deps().policies, broken } }, episode(id, 'broken'), noBeats(1))
  );
  const failed = await store.getJson(keys.trajectoryManifest('attempts', id), TrajectoryManifestSchema);
  assert.notEqual(failed.status, 'ok');
  assert.equal(failed.reward, null);

  const ok = await runEpisodeCore(deps(), episode(id, 'oracle'), noBeats(2));
  const stored = await store.getJson(keys.trajectoryManifest('attempts', id), TrajectoryManifestSchema);
  assert.equal(stored.status, 'ok');
  assert.equal(stored.reward, ok.reward);
});

// ---- the commit rule itself, on records (no env) -----------------------------------------------------

function record(id: string, over: Partial<TrajectoryManifest>): TrajectoryManifest {
  return {
    schemaVersion: 1,
    trajectoryId: id,
    campaignId: 'attempts',
    taskId: 'tick-checkboxes',
    groupId: 'g1',
    seed: 3,
    instruction: 'tick',
    fields: [],
    reward: 1,
    status: 'ok',
    numSteps: 1,
    maxSteps: 3,
    minPolicyVersion: 0,
    maxPolicyVersion: 0,
    stepsKey: keys.trajectorySteps('attempts', id),
    stepsSha256: '0'.repeat(64),
    source: 'rollout',
    envKind: 'browser',
    createdAt: 1,
    ...over,
  };
}

test('commitManifest: a failure record never replaces an ok manifest', async () => {
  const key = keys.trajectoryManifest('attempts', 'ok-first');
  const ok = record('ok-first', { reward: 0.5 });
  assert.equal((await commitManifest(store, key, ok)).written, true);
  const late = await commitManifest(store, key, record('ok-first', { status: 'env_error', reward: null }));
  assert.equal(late.written, false);
  assert.deepEqual(late.manifest, ok);
  assert.deepEqual(await store.getJson(key, TrajectoryManifestSchema), ok);
});

test('commitManifest: concurrent ok attempts agree on one manifest, the stored one', async () => {
  for (let i = 0; i < 6; i++) {
    const id = `race-${i}`;
    const key = keys.trajectoryManifest('attempts', id);
    const [a, b] = await Promise.all([
      commitManifest(store, key, record(id, { reward: 1, createdAt: 1 })),
      commitManifest(store, key, record(id, { reward: 0, createdAt: 2 })),
    ]);
    assert.equal([a.written, b.written].filter(Boolean).length, 1, 'exactly one attempt writes');
    assert.deepEqual(a.manifest, b.manifest);
    assert.deepEqual(await store.getJson(key, TrajectoryManifestSchema), a.manifest);
  }
});

test('commitManifest: a damaged manifest is replaced', async () => {
  const key = keys.trajectoryManifest('attempts', 'damaged');
  await store.putBytes(key, Buffer.from('{"not":"a manifest"'), 'application/json');
  const ok = record('damaged', {});
  assert.equal((await commitManifest(store, key, ok)).written, true);
  assert.deepEqual(await store.getJson(key, TrajectoryManifestSchema), ok);
});
