/**
 * The env protocol end to end: EnvServer over a real browser pool, RemoteEnv as the client.
 * Oracle episodes succeed remotely; auth, capacity, bad tasks and crashes map to typed errors.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOraclePolicy } from '../../activities/env/policies';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { EnvCrashedError, EnvUnavailableError, TaskConfigError } from '../../envs/errors';
import { RemoteEnv, RemoteEnvPool } from '../../envs/remote/client';
import { EnvServer } from '../../envs/remote-server';
import type { GuiEnv } from '../../envs/types';
import { loadTask, type TaskSpec } from '../../tasks';
import { playEpisode } from './helpers';

const TOKEN = 'test-token-' + Math.random().toString(36).slice(2);
let backing: BrowserEnvPool;
let server: EnvServer;
let url: string;

before(async () => {
  backing = new BrowserEnvPool({ slots: 2 });
  server = new EnvServer({ pool: backing, token: TOKEN });
  ({ url } = await server.listen());
});
after(async () => {
  await server.close();
  await backing.close();
});

const oracle = (env: GuiEnv) =>
  createOraclePolicy({ env, task: undefined as unknown as TaskSpec, seed: 0, endpoints: [], options: {} });

test('the server binds to 127.0.0.1 and refuses to start without a token', () => {
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.throws(() => new EnvServer({ pool: backing, token: '' }), /token/);
});

test('oracle episodes succeed through the remote protocol', async () => {
  const pool = new RemoteEnvPool({ slots: 2, baseUrl: url, token: TOKEN });
  try {
    const [a, b] = [await pool.acquire(), await pool.acquire()];
    const results = await Promise.all([
      playEpisode(a, loadTask('enter-text'), 5, oracle),
      playEpisode(b, loadTask('scroll-click'), 6, oracle),
    ]);
    assert.deepEqual(
      results.map((r) => r.reward),
      [1, 1]
    );
    assert.equal(results[0]?.firstPng.subarray(1, 4).toString(), 'PNG');
    await pool.release(a);
    await pool.release(b);
  } finally {
    await pool.close();
  }
  assert.equal(backing.stats().busy, 0, 'closing the client pool released the server leases');
});

test('wrong token, no capacity, bad task and lost lease are typed errors', async () => {
  const noAuth = new RemoteEnv('r-noauth', { baseUrl: url, token: 'wrong-token-123', retries: 0 });
  await assert.rejects(() => noAuth.reset(loadTask('click-target'), 1), EnvUnavailableError);

  const env = new RemoteEnv('r-1', { baseUrl: url, token: TOKEN, retries: 0 });
  await assert.rejects(
    () => env.reset({ ...loadTask('click-target'), maxSteps: -3 } as TaskSpec, 1),
    (e: unknown) => e instanceof TaskConfigError && /maxSteps/.test((e as Error).message)
  );
  await env.reset(loadTask('click-target'), 1);

  // Both server slots leased → the third client is told "no capacity" (after its retries).
  const env2 = new RemoteEnv('r-2', { baseUrl: url, token: TOKEN, retries: 0 });
  await env2.reset(loadTask('click-target'), 2);
  const env3 = new RemoteEnv('r-3', { baseUrl: url, token: TOKEN, retries: 1, retryBaseMs: 10 });
  await assert.rejects(
    () => env3.reset(loadTask('click-target'), 3),
    (e: unknown) => e instanceof EnvUnavailableError && /slots/.test((e as Error).message)
  );

  // The server forgets a lease (restart / reaping): the client sees a crash and is marked broken.
  await server.close();
  ({ url } = await (server = new EnvServer({ pool: backing, token: TOKEN })).listen());
  const lost = new RemoteEnv('r-lost', { baseUrl: url, token: TOKEN, retries: 0 });
  await lost.reset(loadTask('click-target'), 4);
  (lost as unknown as { envId: string }).envId = 'env-999-gone';
  await assert.rejects(() => lost.observe(), EnvCrashedError);
  assert.equal(lost.broken, true);
  await lost.close();
  await env.close();
  await env2.close();
});
