/**
 * The PNG charts of benchmark JSON files already written, redrawn without rerunning a benchmark:
 *   npm run bench -- replot            every chart of docs/bench/ from its JSON (--dir <folder> for another)
 *   npm run bench -- charts            the same for the output folder (.data/bench/, docs/bench/ with --publish)
 *   npx tsx bench/charts.ts [--dir d]  the same as replot, without starting Temporal or MinIO
 * A JSON file that is missing is skipped; one that cannot be drawn is reported and the others still are.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import {
  barChartSvg,
  lineChartSvg,
  writeSvgsAsPng,
  type LineChartOptions,
  type Series,
  type SvgPngJob,
} from '../lib/charts';
import type { EvalPoint } from '../schemas/campaign';
import { benchOutDir, publishedBenchDir, shownPath } from './lib/output';

interface EnvRow {
  suite: string;
  contexts: number;
  stepsPerSec: number;
  episodesPerSec: number;
}

interface LearningRun {
  name: string;
  result: { curve: Array<{ episodes: number; seconds: number; success: number }> };
}

export interface LearningChartOptions {
  /** Folder for learning-vs-{episodes,time}.png (default: the bench output folder). */
  dir?: string;
  /** Vertical markers on the success-vs-episodes chart, e.g. [{ x: 0, label: 'RL starts (after BC)' }]. */
  vLines?: LineChartOptions['vLines'];
}

function learningJobs(runs: LearningRun[], dir: string, vLines?: LineChartOptions['vLines']): SvgPngJob[] {
  const series = (x: 'episodes' | 'seconds'): Series[] =>
    runs.map((r) => ({
      name: r.name,
      points: r.result.curve.map((p) => [x === 'episodes' ? p.episodes : p.seconds, p.success] as [number, number]),
    }));
  const common = {
    yLabel: 'held-out greedy success',
    yMin: 0,
    yMax: 1,
    hLines: [{ y: 0.9, label: '90%' }],
    width: 900,
  };
  return [
    {
      svg: lineChartSvg(series('episodes'), {
        ...common,
        title: 'Embedded policy learning curves (success vs episodes)',
        xLabel: 'RL training episodes',
        ...(vLines ? { vLines } : {}),
      }),
      file: path.join(dir, 'learning-vs-episodes.png'),
    },
    {
      svg: lineChartSvg(series('seconds'), {
        ...common,
        title: 'Embedded policy learning curves (success vs wall time)',
        xLabel: 'wall time (s)',
      }),
      file: path.join(dir, 'learning-vs-time.png'),
    },
  ];
}

/** Learning curves (success vs episodes and vs wall time) from docs/bench/learning.json. */
export async function learningCharts(
  runs: LearningRun[],
  chromium?: string,
  opts: LearningChartOptions = {}
): Promise<void> {
  await writeSvgsAsPng(learningJobs(runs, opts.dir ?? benchOutDir(), opts.vLines), chromium);
}

function envThroughputJob(rows: EnvRow[], dir: string): SvgPngJob {
  const suites = [...new Set(rows.map((r) => r.suite))];
  const series: Series[] = suites.flatMap((s) => [
    {
      name: `${s} steps/s`,
      points: rows.filter((r) => r.suite === s).map((r) => [r.contexts, r.stepsPerSec] as [number, number]),
    },
    {
      name: `${s} episodes/s`,
      points: rows.filter((r) => r.suite === s).map((r) => [r.contexts, r.episodesPerSec] as [number, number]),
    },
  ]);
  return {
    svg: lineChartSvg(series, {
      title: 'Browser env throughput vs contexts (one Chromium, 2 cores)',
      xLabel: 'browser contexts',
      yLabel: 'per second',
      width: 860,
    }),
    file: path.join(dir, 'env-throughput.png'),
  };
}

/** As bench/miniwob.ts draws it (task names shortened the same way). */
function miniwobJob(
  j: { method?: string; tasks: Array<{ miniwobTask: string; randomSuccess: number }> },
  dir: string
): SvgPngJob {
  const episodes = /^(\d+) held-out seeds/.exec(j.method ?? '')?.[1] ?? '?';
  const short = (task: string) => task.replace(/^(click|enter|focus)-/, (_, w: string) => `${w[0]}-`);
  return {
    svg: barChartSvg(
      j.tasks.map((t) => ({ label: short(t.miniwobTask), value: t.randomSuccess })),
      {
        title: `MiniWoB++ random-policy success per task (${episodes} held-out seeds each)`,
        yLabel: 'success (raw reward > 0)',
        width: 2400,
        height: 460,
      }
    ),
    file: path.join(dir, 'miniwob-random.png'),
  };
}

/** As bench/quickstart.ts draws it, from the evals quickstart.json keeps (seconds instead of ms). */
async function quickstartJobs(
  j: {
    config?: { policy?: { bcWarmStartEpisodes?: number } };
    evals: Array<{
      version: number;
      atEpisodes: number;
      atSeconds: number;
      success: number;
      perFamily: Record<string, number>;
      evalEpisodes?: number;
    }>;
  },
  dir: string
): Promise<SvgPngJob[]> {
  const { campaignCurveSvg } = await import('../scripts/lib/quickstart-campaign');
  const evals: EvalPoint[] = j.evals.map((e) => ({
    version: e.version,
    successRate: e.success,
    episodes: e.evalEpisodes ?? 0,
    atEpisodes: e.atEpisodes,
    atMs: e.atSeconds * 1000,
    perFamily: e.perFamily,
  }));
  const bc = j.config?.policy?.bcWarmStartEpisodes ?? '?';
  const title = `quickstart campaign (BC on ${bc} demos, then RL) — held-out greedy success`;
  return [
    { svg: campaignCurveSvg(evals, 'episodes', title), file: path.join(dir, 'quickstart-vs-episodes.png') },
    { svg: campaignCurveSvg(evals, 'minutes', title), file: path.join(dir, 'quickstart-vs-time.png') },
  ];
}

/**
 * bench/policy-throughput.ts keeps its chart code to itself; its --chart-only mode is run on a copy of the
 * JSON in a scratch data folder, so only the PNG comes back (not the SVG it also writes).
 */
function policyThroughputChart(dir: string): string {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-replot-'));
  try {
    fs.mkdirSync(path.join(scratch, 'bench'));
    fs.copyFileSync(path.join(dir, 'policy-throughput.json'), path.join(scratch, 'bench', 'policy-throughput.json'));
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/policy-throughput.ts', '--chart-only'], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, DARTFLOW_DATA_DIR: scratch },
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r.status !== 0)
      throw new Error(`bench/policy-throughput.ts --chart-only failed: ${r.stderr || r.error?.message}`);
    const png = path.join(dir, 'policy-throughput.png');
    fs.copyFileSync(path.join(scratch, 'bench', 'policy-throughput.png'), png);
    return png;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** Redraws every chart whose JSON is in dir; returns the PNG files written. */
export async function replotDir(dir: string, chromium = loadInfraSettings().chromiumPath): Promise<string[]> {
  const json = <T>(name: string): T | undefined => {
    const file = path.join(dir, name);
    return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as T) : undefined;
  };
  const written: string[] = [];
  const failed: string[] = [];
  // Each chart on its own: one bad file is reported, the others are still drawn.
  const attempt = async (name: string, draw: () => Promise<string[]>) => {
    if (!fs.existsSync(path.join(dir, name))) return;
    try {
      written.push(...(await draw()));
    } catch (err) {
      failed.push(`${name}: ${(err as Error).message}`);
    }
  };
  const batch = async (jobs: SvgPngJob[]) => {
    await writeSvgsAsPng(jobs, chromium);
    return jobs.map((j) => j.file);
  };

  await attempt('learning.json', () => batch(learningJobs(json<{ runs: LearningRun[] }>('learning.json')!.runs, dir)));
  await attempt('env-throughput.json', () =>
    batch([envThroughputJob(json<{ rows: EnvRow[] }>('env-throughput.json')!.rows, dir)])
  );
  await attempt('miniwob.json', () => batch([miniwobJob(json('miniwob.json')!, dir)]));
  await attempt('quickstart.json', async () => batch(await quickstartJobs(json('quickstart.json')!, dir)));
  await attempt('ablation.json', async () => {
    const { ablationCharts } = await import('./ablation');
    const j = json<{
      configs: Array<{ id: string; label: string }>;
      summary?: Parameters<typeof ablationCharts>[3];
      runs: Array<{ configId: string }>;
    }>('ablation.json')!;
    if (!j.summary) throw new Error('no summary in it (npm run bench -- ablation --report computes one)');
    const configs = j.configs.filter((c) => j.runs.some((r) => r.configId === c.id));
    await ablationCharts(dir, 'ablation', configs, j.summary, chromium);
    return ['curves', 'final', 'per-family'].map((s) => path.join(dir, `ablation-${s}.png`));
  });
  await attempt('efficiency.json', async () => {
    const { efficiencyChart } = await import('./efficiency');
    const file = path.join(dir, 'efficiency.png');
    await efficiencyChart(json<{ results: Parameters<typeof efficiencyChart>[0] }>('efficiency.json')!.results, file);
    return [file];
  });
  await attempt('overhead.json', async () => {
    const { overheadChart } = await import('./overhead');
    const file = path.join(dir, 'overhead.png');
    await overheadChart(json<{ runs: Parameters<typeof overheadChart>[0] }>('overhead.json')!.runs, file);
    return [file];
  });
  await attempt('scale.json', async () => {
    const [{ scaleChart }, { readScalePoints }] = await Promise.all([import('./scale'), import('./lib/scale-points')]);
    const file = path.join(dir, 'scale.png');
    await scaleChart(readScalePoints(path.join(dir, 'scale.json')), file);
    return [file];
  });
  await attempt('policy-throughput.json', async () => [policyThroughputChart(dir)]);

  console.log(
    `redrew ${written.length} charts in ${shownPath(dir)}: ${written.map((f) => path.basename(f)).join(', ')}`
  );
  if (failed.length) throw new Error(`could not redraw:\n  ${failed.join('\n  ')}`);
  return written;
}

const dirArg = (args: readonly string[]): string | undefined => {
  const i = args.indexOf('--dir');
  return i >= 0 ? path.resolve(args[i + 1] ?? '.') : undefined;
};

/** `npm run bench -- charts`: every chart of the bench output folder from its JSON. */
export async function benchCharts(args: string[] = []): Promise<void> {
  await replotDir(dirArg(args) ?? benchOutDir());
}

/** `npm run bench -- replot [--dir <folder>]`: every chart of docs/bench/ (the published one) from its JSON. */
export async function benchReplot(args: string[] = []): Promise<void> {
  await replotDir(dirArg(args) ?? publishedBenchDir());
}

if (require.main === module) {
  benchReplot(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
