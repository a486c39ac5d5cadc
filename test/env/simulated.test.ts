/** The simulated env: oracle solves, random is near chance, and the latency profiles have the intended shape. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createOraclePolicy, createRandomPolicy, mulberry32 } from '../../activities/env/policies';
import { SIM_PROFILES, SimulatedEnvPool, sampleLatency } from '../../envs/simulated';
import type { GuiEnv } from '../../envs/types';
import { loadSuite, type TaskSpec } from '../../tasks';
import { playEpisode } from './helpers';

const oracle = (env: GuiEnv) =>
  createOraclePolicy({ env, task: undefined as unknown as TaskSpec, seed: 0, endpoints: [], options: {} });

test('simulated envs: the oracle always succeeds, random rarely does', async () => {
  const pool = new SimulatedEnvPool({ slots: 4, profile: SIM_PROFILES.fast!, timeScale: 0 });
  const env = await pool.acquire();
  let oracleWins = 0;
  let randomWins = 0;
  for (const task of loadSuite('all').taskSpecs) {
    for (let seed = 0; seed < 20; seed++) {
      oracleWins += (await playEpisode(env, task, seed, oracle)).reward;
      randomWins += (await playEpisode(env, task, seed, () => createRandomPolicy())).reward;
    }
  }
  assert.equal(oracleWins, 160);
  assert.ok(randomWins / 160 < 0.1, `random ${randomWins}/160`);
  await pool.release(env);
  await pool.close();
});

test('the OSWorld-like profile is heavy-tailed; the fast profile is not', () => {
  const quantiles = (name: string, kind: 'step' | 'reset') => {
    const rand = mulberry32(42);
    const xs = Array.from({ length: 20_000 }, () => sampleLatency(SIM_PROFILES[name]![kind], rand)).sort(
      (a, b) => a - b
    );
    const q = (p: number) => xs[Math.floor(p * (xs.length - 1))] ?? 0;
    return { p50: q(0.5), p99: q(0.99), max: q(1) };
  };
  const os = quantiles('osworld', 'step');
  assert.ok(os.p50 > 2000 && os.p50 < 3500, `osworld step p50 ${os.p50}`);
  assert.ok(os.p99 / os.p50 > 3, `osworld step p99/p50 ${os.p99 / os.p50}`);
  const reset = quantiles('osworld', 'reset');
  assert.ok(reset.p50 > 15_000 && reset.max <= 300_000 + reset.p50 * 10);
  const fast = quantiles('fast', 'step');
  assert.ok(fast.p99 / fast.p50 < 2, `fast step p99/p50 ${fast.p99 / fast.p50}`);
});

test('the pool never hands out more envs than slots and serves waiters in order', async () => {
  const pool = new SimulatedEnvPool({ slots: 2, profile: SIM_PROFILES.fast! });
  const a = await pool.acquire();
  const b = await pool.acquire();
  const order: string[] = [];
  const c = pool.acquire().then((e) => (order.push('c'), e));
  const d = pool.acquire().then((e) => (order.push('d'), e));
  const ac = new AbortController();
  const aborted = pool.acquire(ac.signal);
  ac.abort();
  await assert.rejects(aborted, /aborted/);
  assert.equal(pool.stats().waiting, 2);
  await pool.release(a);
  await pool.release(b, { broken: true });
  const [ec, ed] = await Promise.all([c, d]);
  assert.deepEqual(order, ['c', 'd']);
  assert.notEqual(ed.id, b.id, 'a broken env is replaced');
  assert.deepEqual(pool.stats(), { kind: 'simulated', slots: 2, busy: 2, waiting: 0, replaced: 1 });
  await pool.release(ec);
  await pool.release(ed);
  await pool.close();
});
