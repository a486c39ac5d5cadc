/**
 * Renders the PNG charts of benchmark JSON files already written (env throughput), so charts can be
 * regenerated without rerunning a benchmark: npm run bench -- charts. The policy-server chart is redrawn
 * by `npx tsx bench/policy-throughput.ts --chart-only`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadInfraSettings } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../lib/charts';
import { benchOutDir, shownPath } from './lib/output';

const read = <T>(name: string): T | undefined => {
  const file = path.join(benchOutDir(), name);
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as T) : undefined;
};

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
    path.join(benchOutDir(), 'learning-vs-episodes.png'),
    chromium
  );
  await writeSvgAsPng(
    lineChartSvg(series('seconds'), {
      ...common,
      title: 'Embedded policy learning curves (success vs wall time)',
      xLabel: 'wall time (s)',
    }),
    path.join(benchOutDir(), 'learning-vs-time.png'),
    chromium
  );
}

export async function benchCharts(): Promise<void> {
  const chromium = loadInfraSettings().chromiumPath;
  const learning = read<{ runs: LearningRun[] }>('learning.json');
  if (learning) {
    await learningCharts(learning.runs, chromium);
    console.log(`wrote ${shownPath(benchOutDir())}/learning-vs-{episodes,time}.png`);
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
      path.join(benchOutDir(), 'env-throughput.png'),
      chromium
    );
    console.log(`wrote ${shownPath(path.join(benchOutDir(), 'env-throughput.png'))}`);
  }
  // The policy-server chart is drawn by its own bench: `npx tsx bench/policy-throughput.ts --chart-only`.
}
