/**
 * Killing Chromium (kill -9 of its PID) mid-episode surfaces as EnvCrashedError (never a reward), and
 * the next episode runs on a freshly launched browser from the same pool.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createOraclePolicy } from '../../activities/env/policies';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { EnvCrashedError, EnvError, TaskConfigError } from '../../envs/errors';
import type { GuiEnv } from '../../envs/types';
import { loadTask, type TaskSpec } from '../../tasks';
import { playEpisode } from './helpers';

const oracle = (env: GuiEnv) =>
  createOraclePolicy({ env, task: undefined as unknown as TaskSpec, seed: 0, endpoints: [], options: {} });

async function waitFor(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('kill -9 of the browser mid-episode is a typed crash, and the next episode works on a fresh browser', async () => {
  const pool = new BrowserEnvPool({ slots: 2 });
  try {
    const task = loadTask('enter-text');
    const env = await pool.acquire();
    await env.reset(task, 7);
    const first = await env.oracle?.();
    assert.ok(first);
    await env.step(first); // mid-episode: the field is focused, nothing submitted yet
    const pid = pool.host.pid;
    assert.ok(pid, 'the Chromium PID is known');
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !pool.host.isConnected(), 'the browser to disconnect');

    await assert.rejects(
      async () => {
        await env.observe();
        await env.step({ type: 'type', text: 'x' });
      },
      (err: unknown) => err instanceof EnvCrashedError && err instanceof EnvError && err.retryable
    );
    await pool.release(env, { broken: true });
    assert.equal(pool.stats().replaced, 1);

    // Both slots work again, on a relaunched browser.
    const [a, b] = [await pool.acquire(), await pool.acquire()];
    const [pa, pb] = await Promise.all([
      playEpisode(a, task, 7, oracle),
      playEpisode(b, loadTask('click-colour'), 8, oracle),
    ]);
    assert.equal(pa.reward, 1);
    assert.equal(pb.reward, 1);
    assert.equal(pool.host.launches, 2);
    assert.notEqual(pool.host.pid, pid);
    await pool.release(a);
    await pool.release(b);

    // A page that crashes without the browser dying is detected too.
    const c = await pool.acquire();
    await c.reset(task, 9);
    const page = (c as unknown as { page: { goto(u: string): Promise<unknown> } }).page;
    await page.goto('chrome://crash').catch(() => undefined);
    await assert.rejects(() => c.observe(), EnvCrashedError);
    await pool.release(c);
    assert.equal(pool.stats().replaced, 2, 'a crashed page marks its env broken even without the broken flag');
    const d = await pool.acquire();
    assert.equal((await playEpisode(d, task, 9, oracle)).reward, 1);
    await pool.release(d);
  } finally {
    await pool.close();
  }
});

test('an exception in the task page script is a TaskConfigError, and the env stays healthy', async () => {
  const pool = new BrowserEnvPool({ slots: 1 });
  try {
    const env = await pool.acquire();
    const task = loadTask('click-target');
    await env.reset(task, 1);
    const page = (env as unknown as { page: { evaluate(s: string): Promise<unknown> } }).page;
    await page.evaluate('window.task.oracle = function () { throw new Error("oracle bug"); }');
    await assert.rejects(
      () => env.oracle!(),
      (e: unknown) => e instanceof TaskConfigError && /oracle bug/.test((e as Error).message)
    );
    await pool.release(env);
    assert.equal(pool.stats().replaced, 0);
  } finally {
    await pool.close();
  }
});
