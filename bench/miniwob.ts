/**
 * MiniWoB++ benchmark (not a test): the real MiniWoB++ pages in dartflow's browser env.
 * Default mode (no Temporal needed):
 * - random-policy success per task: the uniform-random embedded policy (the chance baseline every learner
 *   is compared with) on N held-out seeds of every task of the `miniwob` suite;
 * - oracle success on the oracle tasks, exact and snapped to the embedded 16×16 grid (what BC can learn);
 * - env steps/s: steps (act + execute + page state + CDP screenshot) per wall second over C contexts.
 * `--campaign`: one real dartflow campaign on the 11 easy tasks (suite `miniwob-easy`: BC warm start from
 * oracle demos, then RL; bench/lib/miniwob-campaign.ts) on a private bench cluster, then the held-out
 * success per task (greedy and temperature 1, eval seeds disjoint from training seeds) of the BC start and
 * after RL, next to the random policy and published numbers (bench/lib/miniwob-published.ts: published, not
 * measured here). It rewrites only the campaign parts of miniwob.json (the env-throughput and random
 * sections stay) and draws miniwob-campaign.png.
 * Success is MiniWoB's convention, raw reward > 0 (every suite task has raw rewards in {−1, 1}, so it equals
 * dartflow's default successThreshold 1.0).
 *
 *   npx tsx bench/miniwob.ts [--episodes 20] [--contexts 2] [--publish]
 *   npx tsx bench/miniwob.ts --campaign [--minutes 25] [--bc-demos 176] [--bc-epochs 30] [--eval-episodes 20]
 *                            [--eval-every 25] [section.field=value ...] [--publish]
 * Writes to the bench output dir (.data/bench, or docs/bench with --publish).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createOraclePolicy, createRandomPolicy } from '../activities/env/policies';
import type { EpisodePolicy } from '../activities/env/policy';
import { MINIWOB_VERSION, miniwobHtmlDir, miniwobInstalled } from '../envs/browser/miniwob/package';
import { BrowserEnvPool } from '../envs/browser/pool';
import type { GuiEnv } from '../envs/types';
import { barChartSvg, writeSvgAsPng } from '../lib/charts';
import type { EvalPoint } from '../schemas/campaign';
import { loadInfraSettings } from '../infra/settings';
import { ensureInfraSession } from '../scripts/ensure-infra';
import { loadMiniwobSuite, miniwobPageOf } from '../tasks/miniwob';
import type { TaskSpec } from '../tasks/schema';
import { groupedBarChartSvg } from './lib/miniwob-chart';
import {
  MINIWOB_CAMPAIGN_DEFAULTS,
  runMiniwobCampaign,
  type MiniwobCampaignOptions,
  type MiniwobCampaignRun,
} from './lib/miniwob-campaign';
import { MINIWOB_PUBLISHED, MINIWOB_PUBLISHED_NOT_INCLUDED } from './lib/miniwob-published';
import {
  buildMiniwobCampaignSummary,
  chartBars,
  loadStats,
  pctCell,
  rlEpisodesPerMinute,
  summaryMarkdown,
} from './lib/miniwob-summary';
import { benchOutDir, publishedBenchDir, shownPath } from './lib/output';

function argOf(args: readonly string[], name: string, dflt: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? (args[i + 1] ?? dflt) : dflt;
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

/** The published section of miniwob.json (static: the same in both modes). */
function publishedSection() {
  return {
    status: 'published, not measured here: numbers read from the cited table, per source',
    sources: MINIWOB_PUBLISHED.map((p) => ({
      key: p.key,
      agent: p.agent,
      observation: p.observation,
      source: p.source,
    })),
    notIncluded: MINIWOB_PUBLISHED_NOT_INCLUDED,
  };
}

/** miniwob.json as the output dir has it (else the published copy), to keep the sections this mode does not measure. */
function readPrevious(): { file: string; data: Record<string, unknown> } | null {
  for (const dir of [benchOutDir(), publishedBenchDir()]) {
    const file = path.join(dir, 'miniwob.json');
    if (fs.existsSync(file))
      return { file, data: JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown> };
  }
  return null;
}

async function benchRandom(args: readonly string[]): Promise<void> {
  const episodes = Number(argOf(args, 'episodes', '20'));
  const contexts = Number(argOf(args, 'contexts', '2'));
  const suite = loadMiniwobSuite('miniwob');
  const easy = new Set(loadMiniwobSuite('miniwob-easy').tasks);
  const previous = readPrevious();
  const previousTask = (id: string) =>
    (previous?.data.tasks as Array<{ id: string; embeddedAgentHeldOut?: unknown }> | undefined)?.find(
      (t) => t.id === id
    );
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
        embeddedAgentHeldOut: previousTask(t.id)?.embeddedAgentHeldOut ?? null,
        published: publishedOf(miniwobPageOf(t)!.task),
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
      // The campaign parts come from `--campaign` (kept as they are when this mode re-measures the rest).
      embeddedAgent: previous?.data.embeddedAgent ?? {
        status: 'not measured yet: npx tsx bench/miniwob.ts --campaign',
      },
      published: publishedSection(),
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

/** Published numbers for one MiniWoB page, per source key (null when no source has it). */
function publishedOf(miniwobTask: string): Record<string, number> | null {
  const entries = MINIWOB_PUBLISHED.flatMap((p) =>
    p.perTask[miniwobTask] === undefined ? [] : [[p.key, p.perTask[miniwobTask]] as const]
  );
  return entries.length ? Object.fromEntries(entries) : null;
}

/** The commit the workers ran, and files changed on top of it (the workers run the working tree). */
function codeState(): { commit: string; uncommittedFiles: string[] } {
  const git = (...a: string[]) =>
    spawnSync('git', a, { cwd: path.join(__dirname, '..'), encoding: 'utf8' }).stdout ?? '';
  return {
    commit: git('rev-parse', 'HEAD').trim(),
    uncommittedFiles: git('status', '--porcelain')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => l.slice(3)),
  };
}

const CAMPAIGN_FLAGS = ['minutes', 'bc-demos', 'bc-epochs', 'eval-episodes', 'eval-every', 'from-run'];

function campaignOptions(args: readonly string[]): MiniwobCampaignOptions {
  const d = MINIWOB_CAMPAIGN_DEFAULTS;
  const num = (flag: string, dflt: number) => {
    const v = Number(argOf(args, flag, String(dflt)));
    if (!Number.isFinite(v) || v <= 0)
      throw new Error(`--${flag}: expected a positive number, got ${argOf(args, flag, '')}`);
    return v;
  };
  return {
    minutes: num('minutes', d.minutes),
    bcDemos: num('bc-demos', d.bcDemos),
    bcEpochs: num('bc-epochs', d.bcEpochs),
    episodesPerTask: num('eval-episodes', d.episodesPerTask),
    evalEveryVersions: num('eval-every', d.evalEveryVersions),
    extra: args.filter((a) => a.includes('=') && !a.startsWith('--')),
  };
}

async function benchCampaign(args: readonly string[]): Promise<void> {
  const opts = campaignOptions(args);
  const easy = loadMiniwobSuite('miniwob-easy');
  const tasks = easy.taskSpecs.map((t) => ({ id: t.id, miniwobTask: miniwobPageOf(t)!.task }));
  const previous = readPrevious();
  const prevTasks = (previous?.data.tasks ?? []) as Array<Record<string, unknown> & { id: string }>;
  const random = Object.fromEntries(
    prevTasks
      .filter((t) => typeof t.randomSuccess === 'number' && typeof t.miniwobTask === 'string')
      .map((t) => [t.miniwobTask as string, t.randomSuccess as number])
  );
  console.log(
    `[bench miniwob] campaign on ${tasks.length} tasks, ${opts.minutes} min; random baseline from ${previous ? shownPath(previous.file) : 'nowhere (run the default mode first)'}`
  );
  // --from-run <file>: rebuild the outputs from a finished run's record instead of running a campaign.
  const fromRun = argOf(args, 'from-run', '');
  /** notes: what a rebuilt record says about itself (e.g. an evaluation that could not finish). */
  let run: MiniwobCampaignRun & { code: ReturnType<typeof codeState>; command: string; notes?: string[] };
  if (fromRun) {
    run = JSON.parse(fs.readFileSync(fromRun, 'utf8')) as typeof run;
    console.log(`[bench miniwob] outputs from the recorded run ${fromRun}`);
  } else {
    const code = codeState(); // at the start: the workers load the working tree as it is now
    const command = `npx tsx bench/miniwob.ts ${args.join(' ')}`;
    run = { ...(await runMiniwobCampaign(opts)), code, command };
    // The raw record first (git-ignored .data/bench), so a failure below never loses a finished campaign.
    const rawDir = path.join(loadInfraSettings().dataDir, 'bench');
    fs.mkdirSync(rawDir, { recursive: true });
    const raw = path.join(rawDir, `miniwob-campaign-run-${Date.now()}.json`);
    fs.writeFileSync(raw, JSON.stringify(run, null, 2) + '\n');
    console.log(`[bench miniwob] run recorded in ${shownPath(raw)} (--from-run rebuilds the outputs from it)`);
  }
  const { config, result, code } = run;
  if (fromRun) console.log(`[bench miniwob] recorded command: ${run.command}`);
  const evals = result.evals as EvalPoint[];
  const summary = buildMiniwobCampaignSummary({
    tasks,
    evals,
    bcWarmStart: config.policy.bcWarmStartEpisodes > 0,
    random,
    published: MINIWOB_PUBLISHED,
  });
  const table = summaryMarkdown(summary, MINIWOB_PUBLISHED);
  const bcEval = evals.find((e) => e.version === summary.versions.bcStart) ?? null;
  const finalEval = evals.find((e) => e.version === summary.versions.afterRl) ?? null;
  const evalEpisodes = evals.reduce((a, e) => a + e.episodes + (e.sampledEpisodes ?? 0), 0);
  const load = loadStats(run.samples);
  const rate = rlEpisodesPerMinute(run.samples);
  const target = config.campaign.targetSuccess ?? 0.9;
  const embeddedAgent = {
    status: run.notes?.length ? 'measured (see notes)' : 'measured',
    notes: run.notes ?? [],
    measuredAt: new Date().toISOString(),
    command: run.command,
    machine: `${os.cpus().length}-core ${os.cpus()[0]?.model ?? ''}, shared with other work`,
    what:
      'embedded 26k-parameter CNN (pixels + instruction bag of words), real Chromium with the real MiniWoB++ pages; ' +
      'BC warm start on oracle demonstrations (train seeds), then DART step-wise GRPO; every role a local child process ' +
      '(1 env worker × 4 Chromium contexts, 1 policy server, trainer, orchestrator) on a private Temporal namespace and MinIO bucket',
    code,
    overrides: run.overrides,
    config,
    seeds: {
      training:
        "rollouts and BC demos draw seeds from each task file's seeds.train range 0–999,999 (demos: train.from + (i·104729 mod span))",
      evaluation: `held-out: ${config.eval.episodesPerTask} seeds per task evenly spread over seeds.heldOut 1,000,000–1,009,999 (the same seeds in every evaluation; greedy and temperature 1 on the same seeds); disjoint from the training range`,
    },
    budget: {
      campaignMaxMinutes: config.campaign.maxMinutes,
      campaignWallSeconds: Math.round(result.wallMs / 1000),
      totalWallSeconds: Math.round(run.totalWallSeconds),
      bcDemos: config.policy.bcWarmStartEpisodes,
      bcEpochs: config.policy.bcEpochs,
      rlEpisodes: result.episodes,
      trainSteps: result.trainSteps,
      rlTrainSteps: Math.max(0, result.trainSteps - (summary.versions.bcStart !== null ? 1 : 0)),
      evaluations: evals.length,
      evaluationEpisodes: evalEpisodes,
      infraFailures: result.infraFailures,
      bcPhaseSeconds: bcEval ? Math.round(bcEval.atMs / 1000) : null,
      rlPhaseSeconds: bcEval && finalEval ? Math.round((finalEval.atMs - bcEval.atMs) / 1000) : null,
      rlEpisodesPerMinuteSteadyState: rate,
      loadAverage1m: load,
    },
    goal: {
      rule: `≥ ${Math.round(target * 100)} % held-out greedy success on every task after RL`,
      met: summary.tasksAtLeast.afterRl.length === tasks.length,
      tasksMeeting: summary.tasksAtLeast.afterRl,
    },
    versions: summary.versions,
    means: summary.means,
    rows: summary.rows,
    evals: evals.map((e) => ({
      version: e.version,
      atEpisodes: e.atEpisodes,
      atSeconds: Math.round(e.atMs / 1000),
      greedy: e.successRate,
      sampled: e.sampledSuccessRate ?? null,
      greedyEpisodes: e.episodes,
      sampledEpisodes: e.sampledEpisodes ?? 0,
      perTaskGreedy: e.perFamily,
      perTaskSampled: e.sampledPerFamily ?? null,
    })),
    table,
  };
  const base = previous?.data ?? { benchmark: 'miniwob', note: 'env-throughput and random sections not measured yet' };
  const rowOf = new Map(summary.rows.map((r) => [r.id, r]));
  const out = {
    ...base,
    tasks: prevTasks.map((t) => {
      const r = rowOf.get(t.id);
      return r
        ? {
            ...t,
            embeddedAgentHeldOut: {
              bcStartGreedy: r.bcStart.greedy,
              bcStartSampled: r.bcStart.sampled,
              greedy: r.afterRl.greedy,
              sampled: r.afterRl.sampled,
              episodes: r.afterRl.episodes,
            },
            published: publishedOf(r.miniwobTask),
          }
        : t;
    }),
    embeddedAgent,
    published: publishedSection(),
  };
  const dir = benchOutDir();
  const file = path.join(dir, 'miniwob.json');
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  const png = path.join(dir, 'miniwob-campaign.png');
  await writeSvgAsPng(
    groupedBarChartSvg(chartBars(summary, MINIWOB_PUBLISHED), {
      title:
        `MiniWoB++ easy tasks: held-out success of the embedded agent (BC on ${config.policy.bcWarmStartEpisodes} demos, then ` +
        `${result.episodes} RL episodes in ${Math.round(result.wallMs / 60_000)} min) vs random policy and published numbers (not measured here)`,
      yLabel: `success (${config.eval.episodesPerTask} held-out seeds per task)`,
    }),
    png
  );
  console.log(table);
  console.log(
    `[bench miniwob] mean greedy: BC start ${pctCell(summary.means.bcGreedy)} → after RL ${pctCell(summary.means.rlGreedy)} ` +
      `(T=1 ${pctCell(summary.means.bcSampled)} → ${pctCell(summary.means.rlSampled)}); ${result.episodes} RL episodes, ` +
      `${result.trainSteps} train steps, campaign ${(result.wallMs / 60_000).toFixed(1)} min, load ${load ? `${load.min}–${load.max} (mean ${load.mean})` : 'n/a'}; ` +
      `goal (every task ≥ ${Math.round(target * 100)} %): ${embeddedAgent.goal.met ? 'met' : 'NOT met'}`
  );
  console.log(`[bench miniwob] wrote ${shownPath(file)} and ${shownPath(png)}`);
}

/** `npm run bench -- miniwob [--campaign …]` entry (servers are the caller's business, as for every suite). */
export async function benchMiniwob(args: string[]): Promise<void> {
  if (!miniwobInstalled())
    throw new Error(`MiniWoB++ pages not installed in ${miniwobHtmlDir()}: run 'bash infra/install-miniwob.sh'`);
  const known = ['--campaign', '--publish', '--episodes', '--contexts', ...CAMPAIGN_FLAGS.map((f) => `--${f}`)];
  const unknown = args.filter((a) => a.startsWith('--') && !known.includes(a));
  if (unknown.length) throw new Error(`unknown option(s): ${unknown.join(' ')}`);
  if (args.includes('--campaign')) await benchCampaign(args);
  else await benchRandom(args);
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const run = async () => {
    if (!args.includes('--campaign')) return benchMiniwob(args);
    // The campaign needs Temporal and MinIO: started here if not running, and stopped again at the end.
    const infra = await ensureInfraSession({ quiet: true });
    try {
      await benchMiniwob(args);
    } finally {
      const stopped = await infra.stopStartedHere();
      if (stopped.length) console.log(`[bench miniwob] stopped the servers this run started: ${stopped.join(', ')}`);
    }
  };
  run().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    }
  );
}
