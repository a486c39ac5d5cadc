/**
 * Env throughput benchmark (not a test): steps/s and episodes/s of the browser env against the number
 * of contexts in one Chromium, with the oracle policy (so every episode runs its full length).
 * One "step" = policy act (page oracle) + execute + state read + CDP screenshot; an episode adds
 * reset + first screenshot + evaluate.
 *
 *   npx tsx bench/env-throughput.ts [--seconds 8] [--contexts 1,2,4,8]
 * Writes docs/bench/env-throughput.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createOraclePolicy } from '../activities/env/policies';
import { BrowserEnvPool } from '../envs/browser/pool';
import type { GuiEnv } from '../envs/types';
import { loadSuite, type TaskSpec } from '../tasks';
import { isSuccess } from '../algorithms/success';
import { benchOutDir } from './lib/output';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}

interface Row {
  suite: string;
  contexts: number;
  seconds: number;
  episodes: number;
  steps: number;
  successes: number;
  stepsPerSec: number;
  episodesPerSec: number;
  msPerStepPerContext: number;
}

async function runLoop(
  env: GuiEnv,
  tasks: TaskSpec[],
  until: number,
  counters: { episodes: number; steps: number; successes: number },
  offset: number
): Promise<void> {
  let i = offset;
  while (Date.now() < until) {
    const task = tasks[i % tasks.length] as TaskSpec;
    const seed = 500_000 + i++;
    const r = await env.reset(task, seed);
    const policy = createOraclePolicy({ env, task, seed, endpoints: [], options: {} });
    let obs = r.observation;
    for (let step = 0; step < task.maxSteps; step++) {
      const d = await policy.act(
        { ...obs, instruction: r.instruction, fields: r.fields, step },
        { seed, temperature: 1 }
      );
      const s = d.action ? await env.step(d.action) : { done: true };
      counters.steps++;
      if (s.done) break;
      obs = await env.observe();
    }
    const ev = await env.evaluate();
    // Counted with the campaign default (reward ≥ 1.0), not summed: a partial score is not a success.
    if (isSuccess(ev.reward)) counters.successes++;
    if (ev.reward !== 1 && process.env.BENCH_DEBUG)
      console.log(`unsolved: ${task.id} seed ${seed}: ${ev.reason ?? ''}`);
    counters.episodes++;
  }
}

async function measure(suite: string, contexts: number, seconds: number): Promise<Row> {
  const tasks = loadSuite(suite).taskSpecs;
  const pool = new BrowserEnvPool({ slots: contexts });
  try {
    const envs = await Promise.all(Array.from({ length: contexts }, () => pool.acquire()));
    // Warm-up: launch, contexts, and every task page loaded once per context.
    await Promise.all(
      envs.map(async (e) => {
        for (const t of tasks) await e.reset(t, 1);
      })
    );
    const counters = { episodes: 0, steps: 0, successes: 0 };
    const t0 = Date.now();
    const until = t0 + seconds * 1000;
    await Promise.all(envs.map((e, k) => runLoop(e, tasks, until, counters, k * 1000)));
    const elapsed = (Date.now() - t0) / 1000;
    for (const e of envs) await pool.release(e);
    return {
      suite,
      contexts,
      seconds: Number(elapsed.toFixed(2)),
      episodes: counters.episodes,
      steps: counters.steps,
      successes: counters.successes,
      stepsPerSec: Number((counters.steps / elapsed).toFixed(1)),
      episodesPerSec: Number((counters.episodes / elapsed).toFixed(1)),
      msPerStepPerContext: Number(((elapsed * 1000 * contexts) / Math.max(1, counters.steps)).toFixed(1)),
    };
  } finally {
    await pool.close();
  }
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds', '8'));
  const contexts = arg('contexts', '1,2,4,8').split(',').map(Number);
  const rows: Row[] = [];
  for (const suite of ['quickstart', 'all']) {
    for (const n of contexts) {
      const row = await measure(suite, n, seconds);
      rows.push(row);
      console.log(
        `${suite.padEnd(10)} contexts=${String(n).padStart(2)}  ${String(row.stepsPerSec).padStart(6)} steps/s  ${String(row.episodesPerSec).padStart(6)} episodes/s  ` +
          `${row.msPerStepPerContext} ms/step/context  (${row.successes}/${row.episodes} solved)`
      );
    }
  }
  const out = {
    benchmark: 'env-throughput',
    createdAt: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? '',
      memGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
    method:
      'oracle policy; step = act + execute + state + CDP PNG screenshot; viewport 160×160; one Chromium, N contexts',
    rows,
  };
  const file = path.join(benchOutDir(), 'env-throughput.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.log(`wrote ${path.relative(process.cwd(), file)}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
