/**
 * Renders the PNG charts of benchmark JSON files already in docs/bench (env throughput, policy-server
 * throughput), so charts can be regenerated without rerunning a benchmark: npm run bench -- charts
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../lib/charts';

const dir = path.join(PROJECT_ROOT, 'docs', 'bench');
const read = <T>(name: string): T | undefined =>
  fs.existsSync(path.join(dir, name)) ? (JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as T) : undefined;

interface EnvRow {
  suite: string;
  contexts: number;
  stepsPerSec: number;
  episodesPerSec: number;
}
interface PolicyRow {
  maxBatch: number;
  concurrency: number;
  actionsPerSec: number;
  p50Ms?: number;
  p95Ms?: number;
}

interface LearningRun {
  name: string;
  result: { curve: Array<{ episodes: number; seconds: number; success: number }> };
}

/** Learning curves (success vs episodes and vs wall time) from docs/bench/learning.json. */
export async function learningCharts(runs: LearningRun[], chromium?: string): Promise<void> {
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
  await writeSvgAsPng(
    lineChartSvg(series('episodes'), {
      ...common,
      title: 'Embedded policy learning curves (success vs episodes)',
      xLabel: 'RL training episodes',
    }),
    path.join(dir, 'learning-vs-episodes.png'),
    chromium
  );
  await writeSvgAsPng(
    lineChartSvg(series('seconds'), {
      ...common,
      title: 'Embedded policy learning curves (success vs wall time)',
      xLabel: 'wall time (s)',
    }),
    path.join(dir, 'learning-vs-time.png'),
    chromium
  );
}

export async function benchCharts(): Promise<void> {
  const chromium = loadInfraSettings().chromiumPath;
  const learning = read<{ runs: LearningRun[] }>('learning.json');
  if (learning) {
    await learningCharts(learning.runs, chromium);
    console.log('wrote docs/bench/learning-vs-{episodes,time}.png');
  }
  const env = read<{ rows: EnvRow[] }>('env-throughput.json');
  if (env) {
    const suites = [...new Set(env.rows.map((r) => r.suite))];
    const series: Series[] = suites.flatMap((s) => [
      {
        name: `${s} steps/s`,
        points: env.rows.filter((r) => r.suite === s).map((r) => [r.contexts, r.stepsPerSec] as [number, number]),
      },
      {
        name: `${s} episodes/s`,
        points: env.rows.filter((r) => r.suite === s).map((r) => [r.contexts, r.episodesPerSec] as [number, number]),
      },
    ]);
    await writeSvgAsPng(
      lineChartSvg(series, {
        title: 'Browser env throughput vs contexts (one Chromium, 2 cores)',
        xLabel: 'browser contexts',
        yLabel: 'per second',
        width: 860,
      }),
      path.join(dir, 'env-throughput.png'),
      chromium
    );
    console.log('wrote docs/bench/env-throughput.png');
  }
  const policy = read<{ server?: PolicyRow[]; rows?: PolicyRow[] }>('policy-throughput.json');
  const rows = policy?.server ?? policy?.rows;
  if (rows && rows.length > 0 && rows[0]!.maxBatch !== undefined) {
    const batches = [...new Set(rows.map((r) => r.maxBatch))];
    const series: Series[] = batches.map((b) => ({
      name: `maxBatch ${b}`,
      points: rows.filter((r) => r.maxBatch === b).map((r) => [r.concurrency, r.actionsPerSec] as [number, number]),
    }));
    await writeSvgAsPng(
      lineChartSvg(series, {
        title: 'Policy server throughput vs concurrency',
        xLabel: 'concurrent clients',
        yLabel: 'actions / s',
        width: 860,
      }),
      path.join(dir, 'policy-throughput.png'),
      chromium
    );
    console.log('wrote docs/bench/policy-throughput.png');
  }
}
