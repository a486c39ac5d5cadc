/**
 * Control-plane bench (issue 12): what one campaign costs Temporal and whether its history stays small,
 * on simulated OSWorld-like envs (latencies time-scaled) with a DART-sized trainer step time (the real
 * trainStep runs, then the step is held to the simulated time). Reports over a fixed window:
 * - Temporal events per rollout episode and per train step, over every workflow of the campaign
 *   (campaign runs, task groups, train steps, model rollouts, evaluations);
 * - the largest history of any run (Temporal warns at 10,240 events; the hard limit is 51,200),
 *   the continue-as-new count and the largest carried state;
 * - env utilization and train steps in the window.
 *
 *   npx tsx bench/control-plane.ts [--envs 256] [--scale 0.2] [--seconds 600] [--train-seconds 1500]
 *                                  [--queue 3] [--shards 1] [--label point9]
 * `--shards k`: rollout.schedulerShards (k > 1: groups start from k scheduler-shard workflows that report to
 * the campaign in batches; the campaign's own events per episode is what they cut).
 * Writes control-plane.json (one entry per label; earlier labels are kept) to .data/bench, or to docs/bench
 * with --publish (bench/lib/output.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT } from '../infra/settings';
import { ensureInfra } from '../scripts/ensure-infra';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { benchOutDir, setBenchPublish } from './lib/output';
import { splitPublishFlag } from './lib/output-dir';
import { episodeTimes, runCampaignWindow, trainStepTimes } from './lib/campaign-window';
import { efficiencyMetrics } from './lib/efficiency-metrics';
import { collectHistoryStats, summarizeHistories, type HistorySummary } from './lib/history-stats';

interface ControlPlaneResult {
  label: string;
  date: string;
  settings: { envs: number; scale: number; seconds: number; trainSeconds: number; queue: number; shards?: number };
  simulated: string;
  window: { seconds: number; episodes: number; trainSteps: number; envUtilization: number };
  totals: { episodes: number; trainSteps: number; runIndex: number };
  history: HistorySummary;
  eventsPerEpisode: number;
  eventsPerTrainStep: number;
  campaignEventsPerEpisode: number;
  /** Events of the scheduler shards per episode (0 without shards). */
  shardEventsPerEpisode?: number;
}

export async function benchControlPlane(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      envs: { type: 'string', default: '256' },
      scale: { type: 'string', default: '0.2' },
      seconds: { type: 'string', default: '600' },
      'train-seconds': { type: 'string', default: '1500' },
      queue: { type: 'string', default: '3' },
      shards: { type: 'string', default: '1' },
      label: { type: 'string', default: 'default' },
      out: { type: 'string', default: path.join(benchOutDir(), 'control-plane.json') },
    },
  });
  const envs = Number(values.envs);
  const s = {
    envs,
    scale: Number(values.scale),
    seconds: Number(values.seconds),
    trainSeconds: Number(values['train-seconds']),
    queue: Number(values.queue),
    shards: Number(values.shards),
  };
  console.log(`control-plane bench: ${JSON.stringify(s)}`);
  const cluster = await startBenchCluster('cp', {
    envWorkers: 1,
    envSlots: envs,
    envKind: 'simulated',
    simulatedProfile: 'osworld',
    simulatedTimeScale: s.scale,
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
    policyBasePort: 8890 + Math.floor(Math.random() * 100),
  });
  let result: ControlPlaneResult;
  try {
    const id = `cp-${benchSuffix()}`;
    const run = await runCampaignWindow(
      cluster,
      {
        campaign: { id, suite: 'all', maxTrainSteps: 100_000 },
        rollout: { envConcurrency: envs * s.queue, nMax: 8, schedulerShards: s.shards },
        trainer: { minGroups: 6, maxGroups: 8, simulatedStepSeconds: s.trainSeconds },
        env: { kind: 'simulated', simulatedProfile: 'osworld', simulatedTimeScale: s.scale, slotsPerWorker: envs },
        eval: { everyVersions: 100_000, episodesPerTask: 1, gateEveryVersions: 0 },
      },
      { seconds: s.seconds }
    );
    const rollouts = run.manifests.filter((m) => m.source === 'rollout');
    const metrics = efficiencyMetrics(
      episodeTimes([...rollouts, ...run.evalManifests]),
      trainStepTimes(run.ledger, rollouts),
      envs,
      run.window
    );
    console.log('reading histories …');
    const runs = await collectHistoryStats(cluster.client.temporal, {
      onProgress: (n) => {
        if (n % 500 === 0) console.log(`  ${n} runs read`);
      },
    });
    const history = summarizeHistories(runs);
    const episodes = rollouts.length + run.evalManifests.length;
    const campaignEvents = history.byType.campaignWorkflow?.events ?? 0;
    const shardEvents = history.byType.rolloutShardWorkflow?.events ?? 0;
    result = {
      label: values.label!,
      date: new Date().toISOString(),
      settings: s,
      simulated:
        'simulated OSWorld-like envs (reset ≈25 s, step ≈2.6 s, heavy tails) time-scaled by `scale`; trainer step held to trainSeconds × scale after the real trainStep; one Temporal dev server (SQLite) and every role on this 2-core machine',
      window: {
        seconds: metrics.windowSeconds,
        episodes: metrics.episodes,
        trainSteps: metrics.trainSteps,
        envUtilization: metrics.envUtilization,
      },
      totals: { episodes, trainSteps: run.ledger.length, runIndex: run.status.runIndex },
      history,
      eventsPerEpisode: episodes ? history.totalEvents / episodes : 0,
      eventsPerTrainStep: run.ledger.length ? history.totalEvents / run.ledger.length : 0,
      campaignEventsPerEpisode: episodes ? campaignEvents / episodes : 0,
      shardEventsPerEpisode: episodes ? shardEvents / episodes : 0,
    };
  } finally {
    await cluster.close();
  }
  const out = values.out!;
  const previous = fs.existsSync(out)
    ? (JSON.parse(fs.readFileSync(out, 'utf8')) as { results?: ControlPlaneResult[] })
    : {};
  const results = [...(previous.results ?? []).filter((r) => r.label !== result.label), result];
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, `${JSON.stringify({ suite: 'control-plane', results }, null, 2)}\n`);
  console.log(`wrote ${path.relative(PROJECT_ROOT, out)}`);
  console.log(
    `${result.label}: ${result.totals.episodes} episodes, ${result.totals.trainSteps} train steps, ${result.history.continueAsNew} continue-as-new; ` +
      `events/episode ${result.eventsPerEpisode.toFixed(2)} (campaign ${result.campaignEventsPerEpisode.toFixed(2)}, shards ${(result.shardEventsPerEpisode ?? 0).toFixed(2)}), events/train step ${result.eventsPerTrainStep.toFixed(0)}; ` +
      `largest history ${result.history.largest?.events} events (${result.history.largest?.type}); env utilization ${(result.window.envUtilization * 100).toFixed(1)} %`
  );
}

if (require.main === module) {
  const { publish, args } = splitPublishFlag(process.argv.slice(2));
  setBenchPublish(publish);
  ensureInfra({ quiet: true })
    .then(() => benchControlPlane(args))
    .then(() => process.exit(0))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
