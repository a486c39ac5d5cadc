/**
 * The runEpisode activity body against real Chromium and a real MinIO (throwaway bucket): complete
 * trajectories, malformed actions as failed steps, typed failures that never become reward 0, and
 * slot release on every path including cancellation.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { builtinPolicies, createOraclePolicy } from '../../activities/env/policies';
import type { PolicyFactory } from '../../activities/env/policy';
import { runEpisodeCore, type EnvActivityDeps, type EpisodeHooks } from '../../activities/env/run-episode';
import type { EpisodeHeartbeat, RunEpisodeInput } from '../../activities/env/input';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { SIM_PROFILES, SimulatedEnvPool } from '../../envs/simulated';
import type { CanonicalAction } from '../../schemas/actions';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { throwawayStore } from './helpers';

let store: ObjectStore;
let drop: () => Promise<void>;
let pool: BrowserEnvPool;

before(async () => {
  ({ store, drop } = await throwawayStore());
  pool = new BrowserEnvPool({ slots: 1 });
});
after(async () => {
  await pool.close();
  await drop();
});

function hooks(signal?: AbortSignal): EpisodeHooks & { beats: EpisodeHeartbeat[] } {
  const beats: EpisodeHeartbeat[] = [];
  return { beats, heartbeat: (d) => beats.push(d), attempt: 1, ...(signal ? { signal } : {}) };
}

const input = (over: Partial<RunEpisodeInput> = {}): RunEpisodeInput => ({
  campaignId: 'test-campaign',
  groupId: 'g1',
  trajectoryId: `t-${Math.random().toString(36).slice(2, 10)}`,
  task: loadTask('tick-checkboxes'),
  seed: 3,
  policy: { kind: 'oracle' },
  ...over,
});

const deps = (extra: Record<string, PolicyFactory> = {}, p = pool): EnvActivityDeps => ({
  pool: p,
  store,
  policies: { ...builtinPolicies(), ...extra },
});

test('a finished episode leaves a complete trajectory in MinIO (manifest, steps, screenshots)', async () => {
  const h = hooks();
  const inp = input();
  const res = await runEpisodeCore(deps(), inp, h);
  assert.equal(res.status, 'ok');
  assert.equal(res.reward, 1);
  assert.ok(res.numSteps >= 2);
  assert.ok(JSON.stringify(res).length < 1000, 'the result is a small summary');
  const manifest = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
  assert.equal(manifest.reward, 1);
  assert.equal(manifest.taskId, 'tick-checkboxes');
  assert.equal(manifest.numSteps, res.numSteps);
  assert.equal(manifest.envKind, 'browser');
  const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
  assert.equal(steps.length, res.numSteps);
  steps.forEach((s, i) => {
    assert.equal(s.step, i);
    assert.ok(s.action);
    assert.ok(s.actionText.startsWith('Thought: \nAction: click('), s.actionText);
    assert.equal(s.actionOk, true);
  });
  for (const s of steps) {
    const png = await store.getBytes(s.observationKey);
    assert.equal(png.subarray(1, 4).toString(), 'PNG');
  }
  assert.deepEqual(h.beats.at(-1), { trajectoryId: inp.trajectoryId, step: res.numSteps - 1 });
  assert.equal(pool.stats().busy, 0);
});

test('a malformed action is a failed step and the episode goes on', async () => {
  let calls = 0;
  const flaky: PolicyFactory = (ctx) => {
    const oracle = createOraclePolicy(ctx);
    return {
      async act(obs, opts) {
        if (calls++ === 0)
          return {
            action: null,
            actionText: 'Action: fly(to=moon)',
            logProb: -3,
            entropy: 1,
            policyVersion: 5,
            parseError: 'unknown action "fly"',
          };
        return { ...(await oracle.act(obs, opts)), policyVersion: 5 };
      },
    };
  };
  const res = await runEpisodeCore(
    deps({ flaky }),
    input({ task: loadTask('click-colour'), policy: { kind: 'flaky' } }),
    hooks()
  );
  assert.equal(res.reward, 1);
  assert.equal(res.numSteps, 2);
  assert.equal(res.minPolicyVersion, 5);
  const manifest = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
  const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema);
  assert.equal(steps[0]?.actionOk, false);
  assert.equal(steps[0]?.action, null);
  assert.equal(steps[0]?.parseError, 'unknown action "fly"');
});

test('a response with several actions runs them all in one step, stopping at the first that fails', async () => {
  let calls = 0;
  const multi: PolicyFactory = (ctx) => {
    const oracle = createOraclePolicy(ctx);
    return {
      async act(obs, opts) {
        const d = await oracle.act(obs, opts);
        const first = calls++ === 0;
        // Step 0: an unexecutable hotkey first, so the oracle's click after it must not run.
        // Later steps: a wait, then the oracle's action, both within the one step.
        const lead: CanonicalAction = first ? { type: 'hotkey', keys: ['nosuchkey'] } : { type: 'wait' };
        return { ...d, actions: [lead, ...(d.action ? [d.action] : [])] };
      },
    };
  };
  const res = await runEpisodeCore(
    deps({ multi }),
    input({ task: loadTask('click-colour'), policy: { kind: 'multi' } }),
    hooks()
  );
  assert.equal(res.reward, 1, 'the second step ran wait + click and solved the task');
  assert.equal(res.numSteps, 2, 'the click of step 0 was skipped after the failed hotkey');
  const manifest = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
  const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema);
  assert.equal(steps[0]?.actionOk, false);
  assert.equal(steps[1]?.actionOk, true);
});

test('an env crash is a retryable typed failure recorded with reward null, never 0', async () => {
  const crashing = new SimulatedEnvPool({ slots: 1, profile: { ...SIM_PROFILES.fast!, crashProb: 1 } });
  const inp = input({ policy: { kind: 'random' } });
  await assert.rejects(
    () => runEpisodeCore(deps({}, crashing as never), inp, hooks()),
    (err: unknown) => err instanceof ApplicationFailure && err.type === 'EnvCrashedError' && !err.nonRetryable
  );
  const manifest = await store.getJson(
    `campaigns/test-campaign/trajectories/${inp.trajectoryId}/manifest.json`,
    TrajectoryManifestSchema
  );
  assert.equal(manifest.status, 'env_error');
  assert.equal(manifest.reward, null);
  assert.equal(crashing.stats().replaced, 1);
  assert.equal(crashing.stats().busy, 0);
  await crashing.close();
});

test('a bad task is a non-retryable TaskConfigError; bad input and unknown policy are non-retryable too', async () => {
  const bad = { ...loadTask('click-target'), family: 'no-such-family' };
  await assert.rejects(
    () => runEpisodeCore(deps(), input({ task: bad }), hooks()),
    (err: unknown) =>
      err instanceof ApplicationFailure &&
      err.type === 'TaskConfigError' &&
      err.nonRetryable &&
      /field "family"/.test(err.message)
  );
  await assert.rejects(
    () => runEpisodeCore(deps(), { ...input(), seed: -1 }, hooks()),
    (err: unknown) => err instanceof ApplicationFailure && err.type === 'InvalidEpisodeInput' && err.nonRetryable
  );
  await assert.rejects(
    () => runEpisodeCore(deps(), input({ policy: { kind: 'nope' } }), hooks()),
    (err: unknown) => err instanceof ApplicationFailure && err.nonRetryable && /unknown policy kind/.test(err.message)
  );
  assert.equal(pool.stats().busy, 0);
});

test('a failing policy is a retryable PolicyUnavailableError with status policy_error', async () => {
  const broken: PolicyFactory = () => ({
    act: async () => {
      throw new Error('connection refused');
    },
  });
  const inp = input({ policy: { kind: 'broken' } });
  await assert.rejects(
    () => runEpisodeCore(deps({ broken }), inp, hooks()),
    (err: unknown) => err instanceof ApplicationFailure && err.type === 'PolicyUnavailableError' && !err.nonRetryable
  );
  const manifest = await store.getJson(
    `campaigns/test-campaign/trajectories/${inp.trajectoryId}/manifest.json`,
    TrajectoryManifestSchema
  );
  assert.equal(manifest.status, 'policy_error');
  assert.equal(manifest.reward, null);
  assert.equal(pool.stats().busy, 0);
});

test('cancellation stops the episode between steps and releases the slot', async () => {
  const ac = new AbortController();
  const cancelling: PolicyFactory = (ctx) => {
    const oracle = createOraclePolicy(ctx);
    return {
      async act(obs, opts) {
        if (obs.step === 1) ac.abort(new CancelledFailure('test cancel'));
        return oracle.act(obs, opts);
      },
    };
  };
  const inp = input({ policy: { kind: 'cancelling' } });
  await assert.rejects(() => runEpisodeCore(deps({ cancelling }), inp, hooks(ac.signal)), CancelledFailure);
  assert.equal(pool.stats().busy, 0);
  assert.equal(pool.stats().replaced, 0, 'a cancelled env is healthy and kept');
  const manifest = await store.getJson(
    `campaigns/test-campaign/trajectories/${inp.trajectoryId}/manifest.json`,
    TrajectoryManifestSchema
  );
  assert.equal(manifest.status, 'cancelled');
  assert.equal(manifest.reward, null);
});

test("the env slot is released before the episode's index entry is stored; a failed index write is retryable", async () => {
  const sim = new SimulatedEnvPool({ slots: 1, profile: SIM_PROFILES.fast! });
  let open: () => void = () => undefined;
  const gate = new Promise<void>((r) => (open = r));
  let indexWrites = 0;
  let failIndex = false;
  const gated = Object.create(store) as ObjectStore;
  gated.putBytes = (async (...a: Parameters<ObjectStore['putBytes']>) => {
    if (a[0].includes('/index/')) {
      indexWrites++;
      if (failIndex) throw new Error('index write refused');
      await gate;
    }
    return store.putBytes(...a);
  }) as ObjectStore['putBytes'];
  const d = { ...deps({}, sim as never), store: gated };
  let settled = false;
  const episode = runEpisodeCore(d, input({ policy: { kind: 'random' } }), hooks()).finally(() => (settled = true));
  while (indexWrites === 0) await new Promise((r) => setTimeout(r, 10));
  assert.equal(sim.stats().busy, 0, 'the slot is free while the index write is outstanding');
  assert.equal(settled, false, 'the episode is not reported before its index entry is stored');
  open();
  assert.equal((await episode).status, 'ok');

  failIndex = true;
  const inp = input({ policy: { kind: 'random' } });
  await assert.rejects(
    () => runEpisodeCore(d, inp, hooks()),
    (err: unknown) => err instanceof ApplicationFailure && !err.nonRetryable
  );
  const kept = await store.getJson(
    keys.trajectoryManifest('test-campaign', inp.trajectoryId),
    TrajectoryManifestSchema
  );
  assert.equal(kept.status, 'ok', 'the committed manifest stands; a retry indexes it');
  await sim.close();
});

test('an episode waiting for a free env slot has already heartbeated (so the keep-alive covers the wait)', async () => {
  const sim = new SimulatedEnvPool({ slots: 1, profile: SIM_PROFILES.fast! });
  const d = deps({}, sim as never);
  const held = await sim.acquire();
  const h = hooks();
  const inp = input({ policy: { kind: 'random' } });
  const episode = runEpisodeCore(d, inp, h);
  while (sim.stats().waiting === 0) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(h.beats, [{ trajectoryId: inp.trajectoryId, step: 0 }], 'one heartbeat before the slot');
  await sim.release(held);
  assert.equal((await episode).status, 'ok');
  await sim.close();
});
