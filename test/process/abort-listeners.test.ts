/**
 * An env worker lives for days and every runEpisodes activity hands one cancellation signal to all of its
 * episodes. Waiting for an env slot must not add one 'abort' listener per waiter to that signal (Node warns
 * "MaxListenersExceededWarning: Possible EventTarget memory leak detected" past 10), and every listener
 * must be gone once the waiters are served, aborted or the pool closes. Real simulated envs, real MinIO.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { after, before, test } from 'node:test';
import { builtinPolicies } from '../../activities/env/policies';
import { runEpisodeCore } from '../../activities/env/run-episode';
import { EnvUnavailableError } from '../../envs/errors';
import { SIM_PROFILES, SimulatedEnvPool } from '../../envs/simulated';
import type { GuiEnv } from '../../envs/types';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { throwawayStore } from '../env/helpers';

const abortListeners = (signal: AbortSignal): number => getEventListeners(signal, 'abort').length;
const fastPool = (slots: number) => new SimulatedEnvPool({ slots, profile: SIM_PROFILES.fast!, timeScale: 0.01 });

/** Collects Node's MaxListenersExceededWarning while `fn` runs. */
async function leakWarningsDuring(fn: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === 'MaxListenersExceededWarning') seen.push(w.message);
  };
  process.on('warning', onWarning);
  try {
    await fn();
    // Warnings are emitted on the next tick after the listener that crossed the limit.
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off('warning', onWarning);
  }
  return seen;
}

test('50 waiters on one signal share one abort listener, and none is left once they are served', async () => {
  const pool = fastPool(2);
  const signal = new AbortController().signal;
  let peak = 0;
  const warnings = await leakWarningsDuring(async () => {
    const holders = await Promise.all([pool.acquire(signal), pool.acquire(signal)]);
    const waiting = Array.from({ length: 50 }, () => pool.acquire(signal));
    peak = abortListeners(signal);
    assert.equal(pool.stats().waiting, 50);
    // Each release hands the slot to the next waiter, which releases it again: 50 acquire/release cycles.
    const served = waiting.map(async (p) => {
      const env = await p;
      peak = Math.max(peak, abortListeners(signal));
      await pool.release(env);
    });
    for (const env of holders) await pool.release(env);
    await Promise.all(served);
  });
  assert.equal(peak, 1, 'at most one listener on the shared signal while waiters queue');
  assert.equal(abortListeners(signal), 0, 'no listener left after every waiter got its env');
  assert.deepEqual(warnings, []);
  assert.deepEqual(pool.stats(), { kind: 'simulated', slots: 2, busy: 0, waiting: 0, replaced: 0 });
  await pool.close();
});

test('aborting the shared signal rejects every waiter on it with a typed error and removes the listener', async () => {
  const pool = fastPool(1);
  const held = await pool.acquire();
  const ctl = new AbortController();
  const other = new AbortController();
  const onShared = Array.from({ length: 20 }, () => pool.acquire(ctl.signal));
  const onOther = pool.acquire(other.signal);
  assert.equal(abortListeners(ctl.signal), 1);
  ctl.abort();
  const outcomes = await Promise.allSettled(onShared);
  assert.ok(
    outcomes.every((o) => o.status === 'rejected' && o.reason instanceof EnvUnavailableError),
    'every waiter on the aborted signal fails with EnvUnavailableError'
  );
  assert.equal(abortListeners(ctl.signal), 0);
  assert.equal(pool.stats().waiting, 1, 'the waiter on another signal keeps its place');
  await pool.release(held);
  const next: GuiEnv = await onOther;
  assert.equal(abortListeners(other.signal), 0, 'served waiter dropped its listener');
  await assert.rejects(pool.acquire(ctl.signal), EnvUnavailableError, 'an already aborted signal fails at once');
  await pool.release(next);
  await pool.close();
});

test('closing the pool rejects waiters and removes their listeners', async () => {
  const pool = fastPool(1);
  await pool.acquire();
  const signal = new AbortController().signal;
  const waiting = Array.from({ length: 12 }, () => pool.acquire(signal));
  await pool.close();
  const outcomes = await Promise.allSettled(waiting);
  assert.ok(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof EnvUnavailableError));
  assert.equal(abortListeners(signal), 0);
});

let store: ObjectStore;
let drop: () => Promise<void>;
before(async () => {
  ({ store, drop } = await throwawayStore('test-abort-'));
});
after(async () => {
  await drop?.();
});

test('runEpisodes-style: 24 episodes sharing one activity signal over 2 slots leave no listener and no warning', async () => {
  const pool = fastPool(2);
  const signal = new AbortController().signal;
  const task = loadTask('click-target');
  let results: Awaited<ReturnType<typeof runEpisodeCore>>[] = [];
  const warnings = await leakWarningsDuring(async () => {
    results = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        runEpisodeCore(
          { pool, store, policies: builtinPolicies() },
          {
            campaignId: 'abort-listeners',
            groupId: 'g',
            trajectoryId: `abort-listeners-${i}`,
            task,
            seed: i,
            policy: { kind: 'random' },
          },
          { heartbeat: () => undefined, signal, attempt: 1 }
        )
      )
    );
  });
  assert.equal(results.length, 24);
  assert.ok(results.every((r) => r.numSteps >= 1));
  assert.deepEqual(warnings, []);
  assert.equal(abortListeners(signal), 0);
  await pool.close();
});
