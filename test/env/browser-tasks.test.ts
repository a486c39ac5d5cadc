/**
 * Real Chromium: every task family is solved by its oracle on 50 seeds (both with exact clicks and
 * snapped to the embedded 16×16 grid), and a uniform-random policy scores near chance.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createOraclePolicy, createRandomPolicy } from '../../activities/env/policies';
import { BrowserEnvPool } from '../../envs/browser/pool';
import type { GuiEnv } from '../../envs/types';
import { loadSuite, pageFamilyInfo, type TaskSpec } from '../../tasks';
import { playEpisode } from './helpers';

const SEEDS = 50;
const PARALLEL = 3;
let pool: BrowserEnvPool;
let envs: GuiEnv[] = [];
let env: GuiEnv;
const tasks = loadSuite('all').taskSpecs;

before(async () => {
  pool = new BrowserEnvPool({ slots: PARALLEL });
  envs = await Promise.all(Array.from({ length: PARALLEL }, () => pool.acquire()));
  env = envs[0] as GuiEnv;
});
after(async () => {
  for (const e of envs) await pool.release(e);
  await pool.close();
});

/** Runs fn over items on the envs in parallel (one item per env at a time); results in item order. */
async function onEnvs<T, R>(items: T[], fn: (env: GuiEnv, item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    envs.map(async (e) => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(e, items[i] as T);
      }
    })
  );
  return out;
}
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

const oracle = (grid: boolean) => (e: GuiEnv) =>
  createOraclePolicy({ env: e, task: undefined as unknown as TaskSpec, seed: 0, endpoints: [], options: { grid } });

for (const task of tasks) {
  test(`${task.id}: the oracle solves ${SEEDS} seeds (exact and grid-snapped); instructions and layouts vary`, async () => {
    const instructions = new Set<string>();
    const layouts = new Set<string>();
    for (const grid of [false, true]) {
      const played = await onEnvs(range(SEEDS), (e, seed) => playEpisode(e, task, seed, oracle(grid)));
      played.forEach((p, seed) => {
        assert.equal(p.reward, 1, `${task.id} seed ${seed} grid=${grid}: reward ${p.reward}`);
        assert.ok(p.steps <= task.maxSteps);
        instructions.add(p.instruction);
        layouts.add(createHash('sha256').update(p.firstPng).digest('hex'));
      });
    }
    assert.ok(instructions.size >= 3, `${task.id}: only ${instructions.size} distinct instructions`);
    assert.ok(layouts.size >= SEEDS * 0.8, `${task.id}: only ${layouts.size} distinct first screens`);
  });
}

test('the same seed gives the same instruction and the same first screenshot', async () => {
  for (const task of tasks) {
    const a = await env.reset(task, 1234);
    const b = await env.reset(task, 1234);
    assert.equal(a.instruction, b.instruction);
    assert.deepEqual(a.fields, b.fields);
    assert.equal(
      Buffer.compare(Buffer.from(a.observation.png), Buffer.from(b.observation.png)),
      0,
      `${task.id}: screenshots differ`
    );
  }
});

test(`a uniform-random policy scores near chance (${SEEDS} episodes per family)`, async () => {
  const rows: string[] = [];
  for (const task of tasks) {
    const played = await onEnvs(range(SEEDS, 10_000), (e, seed) =>
      playEpisode(e, task, seed, () => createRandomPolicy())
    );
    const wins = played.reduce((n, p) => n + p.reward, 0);
    const rate = wins / SEEDS;
    const { chance } = pageFamilyInfo(task.family);
    const bound = Math.min(1, chance + 0.2); // ~3 binomial sd at n = 50
    rows.push(`${task.id}: ${rate.toFixed(2)} (chance ≈ ${chance}, bound ${bound.toFixed(2)})`);
    assert.ok(rate <= bound, `${task.id}: random success ${rate} exceeds ${bound}`);
  }
  console.log(`random-policy success rates:\n  ${rows.join('\n  ')}`);
});

test('layouts never overlap interactive elements (200 seeds per family)', async () => {
  const page = (env as unknown as { page: { evaluate<T>(f: () => T): Promise<T> } }).page;
  for (const task of tasks) {
    for (let seed = 0; seed < 200; seed++) {
      await env.reset(task, 500_000 + seed);
      const overlaps = await page.evaluate(() => {
        const doc = (
          globalThis as unknown as {
            document: {
              querySelectorAll(
                s: string
              ): ArrayLike<{ getBoundingClientRect(): { left: number; right: number; top: number; bottom: number } }>;
            };
          }
        ).document;
        const rs = Array.from(doc.querySelectorAll('#area > *')).map((e) => e.getBoundingClientRect());
        let n = 0;
        for (let i = 0; i < rs.length; i++)
          for (let j = i + 1; j < rs.length; j++) {
            const a = rs[i]!;
            const b = rs[j]!;
            if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) n++;
          }
        return n;
      });
      assert.equal(overlaps, 0, `${task.id} seed ${500_000 + seed}: ${overlaps} overlapping elements`);
    }
  }
});
