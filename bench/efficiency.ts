/**
 * Efficiency A/B in one run (issue 7.1): DART's decoupled async mode against the coupled sync baseline
 * (`campaign.mode: sync`) on the same task mix, through the real campaign workflow with real Temporal
 * workers, on the simulated env with the OSWorld-like latency profile time-scaled, and a trainer whose
 * step takes a DART-like time (scaled the same way; the real trainStep still runs).
 *
 *   npm run bench -- efficiency [--slots 64] [--scale 0.1] [--seconds 150] [--train-seconds 120]
 *                               [--warmup 0] [--min-train-steps 0]
 *
 * `--warmup s` opens each mode's window s seconds after its first episode; `--min-train-steps n` keeps a mode's
 * window open past `--seconds` until n train steps committed in it (capped at 4 × seconds), so rates rest on
 * enough steps in both modes. Writes efficiency.json and efficiency.png (docs/bench with --publish).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { barChartSvg, writeSvgAsPng } from '../lib/charts';
import type { CampaignConfigInput } from '../schemas/config';
import { keys } from '../storage/keys';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { episodeTimes, runCampaignWindow, trainStepTimes, type CampaignWindowRun } from './lib/campaign-window';
import {
  DART_EFFICIENCY,
  efficiencyMetrics,
  ratio,
  slotTimeBreakdown,
  type EfficiencyMetrics,
  type SlotTimeBreakdown,
} from './lib/efficiency-metrics';
import { benchOutDir } from './lib/output';

export interface EfficiencySettings {
  slots: number;
  scale: number;
  seconds: number;
  trainSeconds: number;
  /** Episodes the campaign keeps in flight (rollout.envConcurrency). */
  envConcurrency: number;
  suite: string;
  /** rollout.schedulerShards (default 1: the campaign workflow starts every group itself). */
  schedulerShards?: number;
}

export interface ModeResult {
  mode: 'async' | 'sync';
  label: string;
  campaignId: string;
  config: CampaignConfigInput;
  metrics: EfficiencyMetrics;
  slotTime: SlotTimeBreakdown;
  staleDropped: number;
  infraFailures: number;
  meanEpisodeSeconds: number;
  meanStepsPerEpisode: number;
  /** Mean latency of one policy act() call and of one env operation. */
  meanActMs: number;
  meanEnvOpMs: number;
  /** Mean env time of one episode (all its env operations). */
  meanEnvMsPerEpisode: number;
  cores: Record<string, number>;
  /**
   * Share of slot time the env workers themselves counted as held by an episode over the window (their
   * `dartflow_env_busy_seconds_total`; absent when the metrics were not readable). envUtilization counts only
   * the env operations of kept trajectories: the gap is what kept episodes do between env operations (≈ 1 %)
   * plus env time on attempts nobody kept (bench/lib/env-held.ts).
   */
  envHeldShare?: number;
  /** Rollouts in the window whose kept trajectory was written by a retry (attempt ≥ 2). */
  retriedEpisodes: number;
}

export function campaignConfig(
  id: string,
  mode: 'async' | 'sync',
  s: EfficiencySettings
): CampaignConfigInput & { campaign: { id: string } } {
  return {
    campaign: { id, suite: s.suite, mode, maxTrainSteps: 10_000 },
    rollout: { envConcurrency: s.envConcurrency, nMax: 8, schedulerShards: s.schedulerShards ?? 1 },
    // DART: 6–8 task groups of 8 per train step [§4.9]; a DART-sized step time (scaled).
    trainer: { minGroups: 6, maxGroups: 8, simulatedStepSeconds: s.trainSeconds },
    env: {
      kind: 'simulated',
      simulatedProfile: 'osworld',
      simulatedTimeScale: s.scale,
      slotsPerWorker: s.slots,
    },
    // DART has no canary gate and no evaluation during training (§4.9): one small eval at start and end.
    eval: { everyVersions: 100_000, episodesPerTask: 1, gateEveryVersions: 0 },
  };
}

export function summarizeMode(
  run: CampaignWindowRun,
  mode: 'async' | 'sync',
  label: string,
  config: CampaignConfigInput,
  slots: number
): ModeResult {
  const rollouts = run.manifests.filter((m) => m.source === 'rollout');
  const all = [...rollouts, ...run.evalManifests];
  const times = episodeTimes(all);
  const metrics = efficiencyMetrics(times, trainStepTimes(run.ledger, rollouts), slots, run.window);
  const inWindow = rollouts.filter(
    (m) => m.timing && m.timing.acquiredAt >= run.window.start && m.timing.writeStartedAt <= run.window.end
  );
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  return {
    mode,
    label,
    campaignId: run.campaignId,
    config,
    metrics,
    slotTime: slotTimeBreakdown(times, slots, run.window),
    staleDropped: run.status.staleDropped,
    infraFailures: run.status.infraFailures,
    meanEpisodeSeconds: mean(inWindow.map((m) => (m.timing!.writeStartedAt - m.timing!.acquiredAt) / 1000)),
    meanStepsPerEpisode: mean(inWindow.map((m) => m.numSteps)),
    meanEnvMsPerEpisode: mean(inWindow.map((m) => m.timing!.envMs)),
    meanActMs:
      inWindow.reduce((a, m) => a + m.timing!.actMs, 0) /
      Math.max(
        1,
        inWindow.reduce((a, m) => a + m.timing!.actCalls, 0)
      ),
    // reset + (step + observe) per step + evaluate: 2 × steps + 1 operations (the last step has no observe)
    meanEnvOpMs:
      inWindow.reduce((a, m) => a + m.timing!.envMs, 0) /
      Math.max(
        1,
        inWindow.reduce((a, m) => a + 2 * m.numSteps + 1, 0)
      ),
    cores: run.cores,
    ...(run.envBusy ? { envHeldShare: run.envBusy.slotSeconds / (slots * (run.envBusy.overMs / 1000)) } : {}),
    retriedEpisodes: inWindow.filter((m) => keys.attemptOfStepsKey(m.stepsKey) > 1).length,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const fmtRatio = (x: number | null) => (x === null ? '—' : `${x.toFixed(2)}×`);

export async function benchEfficiency(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      slots: { type: 'string', default: '64' },
      scale: { type: 'string', default: '0.1' },
      seconds: { type: 'string', default: '150' },
      'train-seconds': { type: 'string', default: '120' },
      'env-concurrency': { type: 'string' },
      suite: { type: 'string', default: 'all' },
      modes: { type: 'string', default: 'sync,async' },
      out: { type: 'string', default: 'efficiency' },
      warmup: { type: 'string', default: '0' },
      'min-train-steps': { type: 'string', default: '0' },
    },
  });
  const slots = Number(values.slots);
  const s: EfficiencySettings = {
    slots,
    scale: Number(values.scale),
    seconds: Number(values.seconds),
    trainSeconds: Number(values['train-seconds']),
    envConcurrency: Number(values['env-concurrency'] ?? slots),
    suite: values.suite!,
  };
  // `async@256` runs async mode with rollout.envConcurrency 256 (the before/after of the queue fix).
  const modes = values.modes!.split(',').map((m) => {
    const [mode, conc] = m.split('@') as ['async' | 'sync', string | undefined];
    return { mode, envConcurrency: conc ? Number(conc) : s.envConcurrency };
  });
  console.log(`efficiency A/B: ${JSON.stringify(s)}, modes ${values.modes}`);
  const loadAtStart = os.loadavg()[0];
  const cluster = await startBenchCluster('eff', {
    envWorkers: 1,
    envSlots: slots,
    envKind: 'simulated',
    simulatedProfile: 'osworld',
    simulatedTimeScale: s.scale,
    // Success with p = 0.5 at the end of an episode: every GRPO group is trainable in both modes.
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
    policyBasePort: 8790 + Math.floor(Math.random() * 100),
  });
  const results: ModeResult[] = [];
  try {
    for (const { mode, envConcurrency } of modes) {
      const id = `eff-${mode}-${benchSuffix()}`;
      const config = campaignConfig(id, mode, { ...s, envConcurrency });
      console.log(`\n== ${mode}: campaign ${id}, envConcurrency ${envConcurrency}, ${s.seconds} s window`);
      const run = await runCampaignWindow(cluster, config, {
        seconds: s.seconds,
        warmupSeconds: Number(values.warmup),
        minTrainSteps: Number(values['min-train-steps']),
      });
      const label = `${mode === 'async' ? 'decoupled (DART, async)' : 'coupled (sync)'}, envConcurrency ${envConcurrency}`;
      const r = summarizeMode(run, mode, label, config, slots);
      results.push(r);
      console.log(JSON.stringify(r.metrics), JSON.stringify(r.slotTime), JSON.stringify(r.cores));
    }
  } finally {
    await cluster.close();
  }
  const a = results.filter((r) => r.mode === 'async').at(-1);
  const b = results.find((r) => r.mode === 'sync');
  const ratios =
    a && b
      ? {
          envUtilization: ratio(a.metrics.envUtilization, b.metrics.envUtilization),
          rolloutActionsPerMin: ratio(a.metrics.rolloutActionsPerMin, b.metrics.rolloutActionsPerMin),
          trainedActionsPerMin: ratio(a.metrics.trainedActionsPerMin, b.metrics.trainedActionsPerMin),
          trainerUtilization: ratio(a.metrics.trainerUtilization, b.metrics.trainerUtilization),
        }
      : null;
  const dir = benchOutDir();
  const outJson = path.join(dir, `${values.out}.json`);
  const previous = fs.existsSync(outJson) ? (JSON.parse(fs.readFileSync(outJson, 'utf8')) as unknown) : undefined;
  const report = {
    suite: 'efficiency',
    date: new Date().toISOString(),
    // The load average says whether other work shared the cores while this ran (figures are lower bounds then).
    machine: { cpus: os.cpus().length, loadAverage1m: { start: loadAtStart, end: os.loadavg()[0] } },
    settings: { ...s, warmupSeconds: Number(values.warmup), minTrainSteps: Number(values['min-train-steps']) },
    dart: DART_EFFICIENCY,
    results,
    ratios,
    ...(previous && (previous as { history?: unknown[] }).history
      ? { history: (previous as { history: unknown[] }).history }
      : {}),
  };
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(outJson, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nwrote ${path.relative(PROJECT_ROOT, outJson)}`);
  for (const r of results)
    console.log(
      `${r.label}: env util ${pct(r.metrics.envUtilization)}, rollout ${r.metrics.rolloutActionsPerMin.toFixed(0)} actions/min, trained ${r.metrics.trainedActionsPerMin.toFixed(0)} actions/min, trainer util ${pct(r.metrics.trainerUtilization)}`
    );
  if (ratios)
    console.log(
      `async/sync: env util ${fmtRatio(ratios.envUtilization)} (DART 5.5×), rollout ${fmtRatio(ratios.rolloutActionsPerMin)}, trained ${fmtRatio(ratios.trainedActionsPerMin)} (DART 1.9×), trainer util ${fmtRatio(ratios.trainerUtilization)} (DART GPU 1.6×)`
    );
  if (results.length > 0) await efficiencyChart(results, path.join(dir, `${values.out}.png`));
}

const short = (r: ModeResult) =>
  r.mode === 'sync' ? 'sync' : `async ${(r.config.rollout?.envConcurrency ?? 0) / r.metrics.slots}×`;

export async function efficiencyChart(results: ModeResult[], file: string): Promise<void> {
  const color = (r: ModeResult) => (r.mode === 'sync' ? '#d62728' : '#1f77b4');
  const bars = [
    ...results.map((r) => ({ label: `env ${short(r)}`, value: r.metrics.envUtilization * 100, color: color(r) })),
    ...results.map((r) => ({
      label: `trainer ${short(r)}`,
      value: r.metrics.trainerUtilization * 100,
      color: color(r),
    })),
    { label: 'DART env sync', value: DART_EFFICIENCY.envUtilization.sync * 100, color: '#bbbbbb' },
    { label: 'DART env async', value: DART_EFFICIENCY.envUtilization.async * 100, color: '#888888' },
  ];
  await writeSvgAsPng(
    barChartSvg(bars, {
      title: `Env and trainer utilization % (${results[0]!.metrics.slots} simulated OSWorld-like envs; async N× = envConcurrency / slots)`,
      yLabel: 'percent of wall time',
      width: 1000,
    }),
    file,
    loadInfraSettings().chromiumPath
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
}
