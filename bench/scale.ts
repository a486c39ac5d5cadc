/**
 * Scale (issue 7.3): 64, 256 and 512 concurrent simulated envs (OSWorld-like profile, time-scaled) on this
 * machine with the shared dev server (a private namespace): throughput, env utilization and the CPU each
 * role used, to find where dartflow stops scaling and why. Each point is one bounded async campaign.
 *
 *   npm run bench -- scale [--envs 64,256,512] [--scale 0.2] [--seconds 90] [--shards 1] [--per-worker 256]
 *                          [--warmup 0]
 *
 * `--warmup s`: the measurement window opens s seconds after the first episode leases an env (steady state).
 *
 * Writes scale.json and scale.png (docs/bench with --publish). A run adds its points to the file's and replaces
 * only those with the same envs, time scale and shard count, so the ×0.2 and real-time series, with and
 * without scheduler shards, come from separate runs into one table and chart.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../lib/charts';
import { campaignConfig, summarizeMode } from './efficiency';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { runCampaignWindow } from './lib/campaign-window';
import { benchOutDir } from './lib/output';
import { mergeScalePoints, readScalePoints, type ScalePoint } from './lib/scale-points';

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
      shards: { type: 'string', default: '1' },
      warmup: { type: 'string', default: '0' },
    },
  });
  const scale = Number(values.scale);
  const shards = Number(values.shards);
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
        schedulerShards: shards,
      });
      console.log(
        `\n== ${envs} envs ×${scale} (${envWorkers} env workers), envConcurrency ${envConcurrency}, ${shards} scheduler shard(s)`
      );
      const run = await runCampaignWindow(cluster, config, {
        seconds: Number(values.seconds),
        warmupSeconds: Number(values.warmup),
      });
      const result = summarizeMode(run, 'async', `${envs} envs`, config, envs);
      // Every env busy with env operations all the time: envs × (steps per episode / env time per episode).
      const idealActionsPerMin =
        result.meanEnvMsPerEpisode > 0 ? (envs * 60_000 * result.meanStepsPerEpisode) / result.meanEnvMsPerEpisode : 0;
      points.push({ envs, scale, shards, envWorkers, envConcurrency, result, idealActionsPerMin });
      console.log(
        `${envs} envs: env util ${(result.metrics.envUtilization * 100).toFixed(1)} % (envs held by an episode ${result.envHeldShare === undefined ? 'unknown' : `${(result.envHeldShare * 100).toFixed(1)} %`}, ${result.retriedEpisodes} episodes kept from a retry), ${result.metrics.rolloutActionsPerMin.toFixed(0)} actions/min (ideal ${idealActionsPerMin.toFixed(0)}), act ${result.meanActMs.toFixed(1)} ms, cores ${JSON.stringify(result.cores)}`
      );
    } finally {
      await cluster.close();
    }
  }
  const dir = benchOutDir();
  const file = path.join(dir, 'scale.json');
  const merged = mergeScalePoints(readScalePoints(file), points);
  fs.writeFileSync(
    file,
    `${JSON.stringify({ suite: 'scale', date: new Date().toISOString(), points: merged }, null, 2)}\n`
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
  await scaleChart(merged, path.join(dir, 'scale.png'));
}

const seriesName = (p: ScalePoint): string => `×${p.scale}${p.shards > 1 ? `, ${p.shards} shards` : ''}`;

export async function scaleChart(points: ScalePoint[], file: string): Promise<void> {
  // One env-utilization line per (time scale, shards) configuration; the 90 % target as a flat line.
  const names = [...new Set(points.map(seriesName))];
  const series: Series[] = names.map((name) => ({
    name: `env utilization %, ${name}`,
    points: points.filter((p) => seriesName(p) === name).map((p) => [p.envs, p.result.metrics.envUtilization * 100]),
  }));
  const xs = points.map((p) => p.envs);
  if (xs.length)
    series.push({
      name: 'target 90 %',
      points: [
        [Math.min(...xs), 90],
        [Math.max(...xs), 90],
      ],
    });
  await writeSvgAsPng(
    lineChartSvg(series, {
      title: 'Scale: env utilization vs concurrent simulated OSWorld-like envs, 2 cores, one dev server',
      xLabel: 'concurrent envs',
      yLabel: 'env utilization %',
      width: 900,
    }),
    file,
    loadInfraSettings().chromiumPath
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
}
