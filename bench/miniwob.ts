/**
 * MiniWoB++ benchmark (not a test): the real MiniWoB++ pages in dartflow's browser env.
 * - random-policy success per task: the uniform-random embedded policy (the chance baseline every learner
 *   is compared with) on N held-out seeds of every task of the `miniwob` suite;
 * - oracle success on the oracle tasks, exact and snapped to the embedded 16×16 grid (what BC can learn);
 * - env steps/s: steps (act + execute + page state + CDP screenshot) per wall second over C contexts.
 * Success is MiniWoB's convention, raw reward > 0 (every suite task has raw rewards in {−1, 1}, so it equals
 * dartflow's default successThreshold 1.0). The embedded agent after a campaign and published numbers are
 * left null here: docs/miniwob.md says how to produce the first; the second needs cited sources.
 *
 *   npx tsx bench/miniwob.ts [--episodes 20] [--contexts 2] [--publish]
 * Writes miniwob.json + miniwob-random.png to the bench output dir (.data/bench, or docs/bench with --publish).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createOraclePolicy, createRandomPolicy } from '../activities/env/policies';
import type { EpisodePolicy } from '../activities/env/policy';
import { MINIWOB_VERSION, miniwobHtmlDir, miniwobInstalled } from '../envs/browser/miniwob/package';
import { BrowserEnvPool } from '../envs/browser/pool';
import type { GuiEnv } from '../envs/types';
import { barChartSvg, writeSvgAsPng } from '../lib/charts';
import { loadMiniwobSuite, miniwobPageOf } from '../tasks/miniwob';
import type { TaskSpec } from '../tasks/schema';
import { benchOutDir, shownPath } from './lib/output';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}

interface Episode {
  rawReward: number;
  steps: number;
}

async function play(env: GuiEnv, task: TaskSpec, seed: number, policy: EpisodePolicy): Promise<Episode> {
  const r = await env.reset(task, seed);
  let obs = r.observation;
  let steps = 0;
  for (let step = 0; step < task.maxSteps; step++) {
    const d = await policy.act(
      { ...obs, instruction: r.instruction, fields: r.fields, step },
      { seed: seed * 1000 + step, temperature: 1 }
    );
    steps++;
    const s = d.action ? await env.step(d.action) : { done: false };
    if (s.done) break;
    obs = await env.observe();
  }
  return { rawReward: (await env.evaluate()).reward, steps };
}

/** Runs `jobs` over the envs (one job per env at a time); returns results in job order and the wall time. */
async function onEnvs<T, R>(
  envs: GuiEnv[],
  jobs: T[],
  fn: (env: GuiEnv, job: T) => Promise<R>
): Promise<{ out: R[]; ms: number }> {
  const out = new Array<R>(jobs.length);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    envs.map(async (e) => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await fn(e, jobs[i] as T);
      }
    })
  );
  return { out, ms: performance.now() - t0 };
}

/** Chart labels: 36 bars side by side, so "click-"/"enter-"/"focus-" shrink to "c-"/"e-"/"f-". */
const shortLabel = (task: string): string => task.replace(/^(click|enter|focus)-/, (_, w: string) => `${w[0]}-`);

const rate = (xs: number[]) => (xs.length ? Number((xs.filter((x) => x > 0).length / xs.length).toFixed(3)) : 0);
const mean = (xs: number[]) => (xs.length ? Number((xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)) : 0);

async function main(): Promise<void> {
  if (!miniwobInstalled())
    throw new Error(`MiniWoB++ pages not installed in ${miniwobHtmlDir()}: run 'bash infra/install-miniwob.sh'`);
  const episodes = Number(arg('episodes', '20'));
  const contexts = Number(arg('contexts', '2'));
  const suite = loadMiniwobSuite('miniwob');
  const easy = new Set(loadMiniwobSuite('miniwob-easy').tasks);
  const pool = new BrowserEnvPool({ slots: contexts });
  const envs = await Promise.all(Array.from({ length: contexts }, () => pool.acquire()));
  try {
    // Jobs grouped by task (as a GRPO group keeps one task on an env), so page loads are a small share.
    const seedsOf = (t: TaskSpec) => Array.from({ length: episodes }, (_, i) => t.seeds.heldOut.from + i);
    const randomJobs = suite.taskSpecs.flatMap((t) => seedsOf(t).map((seed) => ({ t, seed })));
    const random = await onEnvs(envs, randomJobs, (e, j) => play(e, j.t, j.seed, createRandomPolicy()));
    const randomSteps = random.out.reduce((a, e) => a + e.steps, 0);
    console.log(
      `random policy: ${randomJobs.length} episodes, ${randomSteps} steps in ${(random.ms / 1000).toFixed(1)} s`
    );

    const oracleTasks = suite.taskSpecs.filter((t) => easy.has(t.id));
    const oracleJobs = oracleTasks.flatMap((t) =>
      seedsOf(t).flatMap((seed) => [false, true].map((grid) => ({ t, seed, grid })))
    );
    const oracle = await onEnvs(envs, oracleJobs, (e, j) =>
      play(
        e,
        j.t,
        j.seed,
        createOraclePolicy({ env: e, task: j.t, seed: j.seed, endpoints: [], options: { grid: j.grid } })
      )
    );
    const oracleSteps = oracle.out.reduce((a, e) => a + e.steps, 0);
    console.log(`oracle: ${oracleJobs.length} episodes, ${oracleSteps} steps in ${(oracle.ms / 1000).toFixed(1)} s`);

    const tasks = suite.taskSpecs.map((t) => {
      const mine = random.out.filter((_, i) => randomJobs[i]!.t.id === t.id);
      const orc = oracle.out.filter((_, i) => oracleJobs[i]!.t.id === t.id);
      const orcOf = (grid: boolean) =>
        orc.filter((_, i) => oracleJobs.filter((j) => j.t.id === t.id)[i]!.grid === grid);
      return {
        id: t.id,
        miniwobTask: miniwobPageOf(t)!.task,
        tier: t.tier,
        maxSteps: t.maxSteps,
        randomSuccess: rate(mine.map((e) => e.rawReward)),
        randomMeanRawReward: mean(mine.map((e) => e.rawReward)),
        randomMeanSteps: mean(mine.map((e) => e.steps)),
        oracleSuccess: orc.length ? rate(orcOf(false).map((e) => e.rawReward)) : null,
        oracleGridSuccess: orc.length ? rate(orcOf(true).map((e) => e.rawReward)) : null,
        embeddedAgentHeldOut: null as number | null,
        published: null as null | Record<string, number>,
      };
    });
    for (const r of tasks)
      console.log(
        `${r.id.padEnd(30)} random ${r.randomSuccess.toFixed(2)} (mean raw ${r.randomMeanRawReward.toFixed(2)})` +
          (r.oracleSuccess !== null
            ? `  oracle ${r.oracleSuccess.toFixed(2)} / grid ${r.oracleGridSuccess!.toFixed(2)}`
            : '')
      );

    const out = {
      benchmark: 'miniwob',
      createdAt: new Date().toISOString(),
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model ?? '',
        node: process.version,
        platform: `${os.platform()} ${os.release()}`,
      },
      miniwob: {
        package: `miniwob==${MINIWOB_VERSION}`,
        suite: suite.id,
        tasks: suite.taskSpecs.length,
        easyTasks: easy.size,
      },
      method:
        `${episodes} held-out seeds per task (heldOut.from + i); ${contexts} browser contexts in one Chromium, network locked down; ` +
        'screen 160×210; timeLimit "off" (the step budget ends episodes); success = raw reward > 0; ' +
        "random = uniform over the embedded policy's valid actions (16×16 click grid + tokens); " +
        'step = act + execute + page state + CDP PNG screenshot (+ reset/evaluate per episode, page loads on task switches)',
      envStepsPerSec: {
        randomPolicy: Number(((randomSteps * 1000) / random.ms).toFixed(1)),
        oraclePolicy: Number(((oracleSteps * 1000) / oracle.ms).toFixed(1)),
        contexts,
      },
      randomSuccessMean: mean(tasks.map((t) => t.randomSuccess)),
      tasks,
      embeddedAgent: {
        status: 'not run here (needs a campaign of ~1 h on this 2-core machine)',
        command:
          'npx dartflow campaign start --config configs/quickstart.yaml --set campaign.id=miniwob-easy-1 ' +
          '--set campaign.suite=miniwob-easy --watch ' +
          '(then npx dartflow eval miniwob-easy-1 --suite miniwob-easy --episodes 50)',
      },
      published: {
        status:
          'not filled: no per-task table could be retrieved and cited from this environment; numbers are never invented here',
        candidateSources: [
          'Liu et al. 2018, "Reinforcement Learning on Web Interfaces using Workflow-Guided Exploration" (ICLR), per-task table (WGE)',
          'Humphreys et al. 2022, "A data-driven approach for learning to control computers" (ICML), per-task appendix (CC-Net, human)',
          'Shaw et al. 2023, "From Pixels to UI Actions" (NeurIPS, arXiv 2306.00245), per-task appendix (Pix2Act, pixel-only)',
        ],
      },
    };
    const dir = benchOutDir();
    const file = path.join(dir, 'miniwob.json');
    fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
    const svg = barChartSvg(
      tasks.map((t) => ({ label: shortLabel(t.miniwobTask), value: t.randomSuccess })),
      {
        title: `MiniWoB++ random-policy success per task (${episodes} held-out seeds each)`,
        yLabel: 'success (raw reward > 0)',
        width: 2400,
        height: 460,
      }
    );
    const png = path.join(dir, 'miniwob-random.png');
    await writeSvgAsPng(svg, png);
    console.log(`wrote ${shownPath(file)} and ${shownPath(png)}`);
  } finally {
    for (const e of envs) await pool.release(e);
    await pool.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
