/** EpisodeClock (activities/env/timing.ts) with a hand-driven clock, and the simulated env's time-scale knob. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EpisodeClock } from '../../activities/env/timing';
import { createEnvPool, envPoolConfigFromEnv } from '../../envs/pool-factory';

test('EpisodeClock records env intervals (merging back-to-back ones), policy and storage time', async () => {
  let t = 100;
  const clock = new EpisodeClock(() => t);
  const advance = (ms: number) => async () => {
    t += ms;
  };
  t = 105;
  clock.acquired();
  await clock.env(advance(50)); // reset 105–155
  await clock.act(advance(7)); // 155–162
  await clock.env(advance(20)); // step 162–182
  await clock.env(advance(3)); // observe 182–185, back to back with the step: merged
  await clock.act(advance(5)); // 185–190
  await clock.env(advance(10)); // evaluate 190–200
  clock.writeStarted();
  await clock.uploads(Promise.resolve().then(advance(4)));
  await clock.stepsWrite(Promise.resolve().then(advance(6)));
  const r = clock.record();
  assert.equal(r.queuedAt, 100);
  assert.equal(r.acquiredAt, 105);
  assert.deepEqual(r.envIntervals, [
    [105, 155],
    [162, 185],
    [190, 200],
  ]);
  assert.equal(r.envMs, 83);
  assert.equal(r.actMs, 12);
  assert.equal(r.actCalls, 2);
  assert.equal(r.writeStartedAt, 200);
  assert.equal(r.uploadWaitMs, 4);
  assert.equal(r.stepsWriteMs, 6);
});

test('an env operation that throws is still timed', async () => {
  let t = 0;
  const clock = new EpisodeClock(() => t);
  await assert.rejects(
    clock.env(async () => {
      t += 9;
      throw new Error('crash');
    }),
    /crash/
  );
  assert.equal(clock.record().envMs, 9);
});

test('DARTFLOW_ENV_TIME_SCALE scales simulated latencies; DARTFLOW_ENV_BERNOULLI_REWARD picks the reward model', async () => {
  const cfg = envPoolConfigFromEnv({
    DARTFLOW_ENV_KIND: 'simulated',
    DARTFLOW_ENV_SLOTS: '1',
    DARTFLOW_ENV_PROFILE: 'osworld',
    DARTFLOW_ENV_TIME_SCALE: '0.0001',
    DARTFLOW_ENV_BERNOULLI_REWARD: '1',
  });
  assert.deepEqual(cfg, { kind: 'simulated', slots: 1, profile: 'osworld', timeScale: 0.0001, bernoulliReward: 1 });
  const pool = createEnvPool(cfg);
  const env = await pool.acquire();
  const started = Date.now();
  // OSWorld reset median is 25 s; at 1e-4 it is 2.5 ms (tail capped at 300 s → 30 ms).
  await env.reset({ id: 't', tier: 1, instruction: 'x' } as never, 1);
  assert.ok(Date.now() - started < 500, `reset took ${Date.now() - started} ms`);
  assert.equal((await env.evaluate()).reward, 1);
  await pool.release(env);
  await pool.close();
});
