/**
 * Scale (issue 7.3): 64, 256 and 512 concurrent simulated envs (OSWorld-like profile, time-scaled) on this
 * machine with the shared dev server (a private namespace): throughput, env utilization and the CPU each
 * role used, to find where dartflow stops scaling and why. Each point is one bounded async campaign.
 *
 *   npm run bench -- scale [--envs 64,256,512] [--scale 0.2] [--seconds 90]
 *
 * Writes docs/bench/scale.json and docs/bench/scale.png.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../lib/charts';
import { campaignConfig, summarizeMode, type ModeResult } from './efficiency';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { runCampaignWindow } from './lib/campaign-window';
import { benchOutDir } from './lib/output';

export interface ScalePoint {
  envs: number;
  envWorkers: number;
  envConcurrency: number;
  result: ModeResult;
  /** Ideal rollout actions/min if every env were busy with env operations all the time. */
  idealActionsPerMin: number;
}

export async function benchScale(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      envs: { type: 'string', default: '64,256,512' },
      scale: { type: 'string', default: '0.2' },
      seconds: { type: 'string', default: '90' },
      'train-seconds': { type: 'string', default: '120' },
      'per-worker': { type: 'string', default: '256' },
      queue: { type: 'string', default: '3' },
    },
  });
  const scale = Number(values.scale);
  const points: ScalePoint[] = [];
  for (const envs of values.envs!.split(',').map(Number)) {
    const envWorkers = Math.max(1, Math.ceil(envs / Number(values['per-worker'])));
    const envConcurrency = envs * Number(values.queue);
    const cluster = await startBenchCluster(`scale${envs}`, {
      envWorkers,
      envSlots: envs / envWorkers,
      envKind: 'simulated',
      simulatedProfile: 'osworld',
      simulatedTimeScale: scale,
      simulatedBernoulliReward: 0.5,
      policyServers: 1,
      policyBasePort: 9100 + Math.floor(Math.random() * 90),
    });
    try {
      const id = `scale-${envs}-${benchSuffix()}`;
      const config = campaignConfig(id, 'async', {
        slots: envs,
        scale,
        seconds: Number(values.seconds),
        trainSeconds: Number(values['train-seconds']),
        envConcurrency,
        suite: 'all',
      });
      console.log(`\n== ${envs} envs (${envWorkers} env workers), envConcurrency ${envConcurrency}`);
      const run = await runCampaignWindow(cluster, config, { seconds: Number(values.seconds) });
      const result = summarizeMode(run, 'async', `${envs} envs`, config, envs);
      // Every env busy with env operations all the time: envs × (steps per episode / env time per episode).
      const idealActionsPerMin =
        result.meanEnvMsPerEpisode > 0 ? (envs * 60_000 * result.meanStepsPerEpisode) / result.meanEnvMsPerEpisode : 0;
      points.push({ envs, envWorkers, envConcurrency, result, idealActionsPerMin });
      console.log(
        `${envs} envs: env util ${(result.metrics.envUtilization * 100).toFixed(1)} %, ${result.metrics.rolloutActionsPerMin.toFixed(0)} actions/min (ideal ${idealActionsPerMin.toFixed(0)}), act ${result.meanActMs.toFixed(1)} ms, cores ${JSON.stringify(result.cores)}`
      );
    } finally {
      await cluster.close();
    }
  }
  const dir = benchOutDir();
  const file = path.join(dir, 'scale.json');
  fs.writeFileSync(
    file,
    `${JSON.stringify({ suite: 'scale', date: new Date().toISOString(), scale, points }, null, 2)}\n`
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
  await scaleChart(points, path.join(dir, 'scale.png'));
}

export async function scaleChart(points: ScalePoint[], file: string): Promise<void> {
  const series: Series[] = [
    { name: 'env utilization %', points: points.map((p) => [p.envs, p.result.metrics.envUtilization * 100]) },
    { name: 'actions / s', points: points.map((p) => [p.envs, p.result.metrics.rolloutActionsPerMin / 60]) },
    { name: 'ideal actions / s (all envs busy)', points: points.map((p) => [p.envs, p.idealActionsPerMin / 60]) },
  ];
  await writeSvgAsPng(
    lineChartSvg(series, {
      title: 'Scale: concurrent simulated OSWorld-like envs on 2 cores (one dev server)',
      xLabel: 'concurrent envs',
      yLabel: 'see legend',
      width: 900,
    }),
    file,
    loadInfraSettings().chromiumPath
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
}
