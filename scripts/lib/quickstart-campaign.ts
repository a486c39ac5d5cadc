/**
 * The embedded default, end to end: the quickstart campaign (configs/quickstart.yaml) through Temporal with
 * every role as a local child process. Shared by `npm start` (scripts/start.ts) and the quickstart
 * learning-curve benchmarks (bench/quickstart.ts, bench/suite.ts), so they measure the same code path.
 */
import os from 'node:os';
import path from 'node:path';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { checkEnvWorkerSettings, localWorkersForConfig } from '../../cli/local-workers-config';
import { watchCampaign } from '../../cli/main';
import { DartflowClient } from '../../client/dartflow-client';
import type { CampaignResult } from '../../workflows/campaign';
import { loadCampaignConfig } from '../../config/load';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { lineChartSvg } from '../../lib/charts';
import type { CampaignConfig } from '../../schemas/config';
import type { EvalPoint } from '../../schemas/campaign';

export const QUICKSTART_CONFIG = path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml');

export interface QuickstartRun {
  config: CampaignConfig;
  result: CampaignResult;
  uiLink: string;
  workflowId: string;
}

/**
 * Runs the quickstart campaign with config overrides (`section.field=value`) to completion: local
 * workers as the config's env and policy sections say (by default 1 env worker × 4 Chromium contexts,
 * 1 policy server; plus orchestrator and trainer), a live progress line, then the campaign's result.
 * Ctrl-C terminates the campaign and stops the workers.
 */
export async function runQuickstartCampaign(
  settings: InfraSettings,
  overrides: string[],
  opts: { idPrefix?: string; log?: (line: string) => void } = {}
): Promise<QuickstartRun> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const config = loadCampaignConfig(QUICKSTART_CONFIG, [
    `campaign.id=${opts.idPrefix ?? 'quickstart'}-${stamp}`,
    ...overrides,
  ]);
  // The config's env and policy sections say which workers (defaults: 1 env worker of 4 browser
  // contexts, 1 policy server); `npm start -- env.slotsPerWorker=8` changes them like any other field.
  const workerOptions = localWorkersForConfig(config);
  checkEnvWorkerSettings(workerOptions, process.env);
  const workers: LocalWorkers = startLocalWorkers(settings, workerOptions);
  log(
    `[start] workers: ${workers.children.map((c) => c.name).join(', ')} (logs in ${path.join(settings.dataDir, 'logs')})`
  );
  const client = await DartflowClient.connect(settings);
  let campaignRef: { terminate: () => Promise<unknown> } | undefined;
  let interrupted = false;
  const onSigint = () => {
    // Ctrl-C ends this demo campaign (a durable campaign would resume with the next workers otherwise).
    if (interrupted) return; // a second Ctrl-C (or the group-wide signal) must not cut the cleanup short
    interrupted = true;
    log('\n[start] interrupted: terminating the campaign and stopping workers');
    void (campaignRef?.terminate().catch(() => undefined) ?? Promise.resolve())
      .then(() => workers.stop())
      .then(() => process.exit(130));
  };
  process.on('SIGINT', onSigint);
  try {
    const campaign = await client.startCampaign(config);
    campaignRef = { terminate: () => campaign.handle.terminate('npm start interrupted') };
    const uiLink = `${settings.temporal.uiUrl}/namespaces/${settings.temporal.namespace}/workflows/${campaign.handle.workflowId}`;
    log(`[start] campaign ${config.campaign.id}: ${uiLink}`);
    await watchCampaign(campaign, {
      maxTrainSteps: config.campaign.maxTrainSteps,
      target: config.campaign.targetSuccess,
    });
    const result = await campaign.result();
    return { config, result, uiLink, workflowId: campaign.handle.workflowId };
  } finally {
    process.off('SIGINT', onSigint);
    await client.close();
    await workers.stop();
  }
}

/** What a campaign benchmark records about its run, whatever else it reports (bench/quickstart.ts, suite.ts). */
export function campaignRunRecord(run: QuickstartRun, startedAtMs: number) {
  return {
    machine: `${os.cpus().length}-core ${os.arch()} (${os.cpus()[0]?.model ?? 'unknown CPU'})`,
    campaignId: run.config.campaign.id,
    workflowId: run.workflowId,
    config: run.config,
    episodes: run.result.episodes,
    trainSteps: run.result.trainSteps,
    campaignWallSeconds: run.result.wallMs / 1000,
    totalWallSeconds: (Date.now() - startedAtMs) / 1000,
    infraFailures: run.result.infraFailures,
    loadAverageAtEnd: os.loadavg()[0],
  };
}

/**
 * The evaluation of the behaviour-cloned start (the RL start point), when the campaign had a BC warm start:
 * the evaluation of the version right after the first evaluated one (the warm start evaluates the served
 * version, then clones from it in the campaign's first train step). Undefined without BC, and when that
 * version was not evaluated: a later version, evaluated after RL steps, must not stand in for the BC start.
 */
export function bcStartEval(config: CampaignConfig, evals: readonly EvalPoint[]): EvalPoint | undefined {
  if (config.policy.bcWarmStartEpisodes <= 0 || evals.length === 0) return undefined;
  const first = evals[0]!.version;
  return evals.find((e) => e.version === first + 1);
}

/** What the summary prints and bench/quickstart.ts records: BC start, RL lift, episodes and time apart. */
export interface QuickstartBreakdown {
  bcStart: EvalPoint | null;
  final: EvalPoint | null;
  /** Greedy (and temperature-1) points the RL phase added, overall and per family (null without BC eval). */
  liftPoints: { greedy: number; sampled: number | null; perFamily: Record<string, number> } | null;
  rlEpisodes: number;
  rlTrainSteps: number;
  bcDemos: number;
  evalEpisodes: number;
  /** Null when the campaign had a BC warm start whose version was not evaluated (no phase boundary). */
  bcPhaseSeconds: number | null;
  rlPhaseSeconds: number | null;
  campaignSeconds: number;
  /** The stop rule held: the last `targetConsecutiveEvals` evaluations met the target. */
  targetMet: boolean;
}

export function quickstartBreakdown(config: CampaignConfig, result: CampaignResult): QuickstartBreakdown {
  const evals = result.evals as EvalPoint[];
  const bc = bcStartEval(config, evals) ?? null;
  const final = (result.finalEval as EvalPoint | null) ?? null;
  const lift =
    bc && final
      ? {
          greedy: (final.successRate - bc.successRate) * 100,
          sampled:
            final.sampledSuccessRate !== undefined && bc.sampledSuccessRate !== undefined
              ? (final.sampledSuccessRate - bc.sampledSuccessRate) * 100
              : null,
          perFamily: Object.fromEntries(
            Object.entries(final.perFamily).map(([f, v]) => [f, (v - (bc.perFamily[f] ?? 0)) * 100])
          ),
        }
      : null;
  const target = config.campaign.targetSuccess;
  const k = config.campaign.targetConsecutiveEvals;
  const lastK = evals.slice(-k);
  const targetMet =
    target !== undefined &&
    lastK.length === k &&
    lastK.every(
      (e) =>
        e.successRate >= target &&
        Object.values(e.perFamily).every((v) => v >= target) &&
        Object.keys(e.perFamily).every(
          (f) =>
            (e.episodesPerFamily?.[f] ?? e.episodes / Math.max(1, Object.keys(e.perFamily).length)) >=
            config.campaign.targetMinEpisodesPerFamily
        )
    );
  const hadBc = config.policy.bcWarmStartEpisodes > 0;
  // Without the BC version's evaluation the phases have no boundary to time them by.
  const bcPhaseSeconds = bc ? bc.atMs / 1000 : hadBc ? null : 0;
  return {
    bcStart: bc,
    final,
    liftPoints: lift,
    rlEpisodes: result.episodes,
    rlTrainSteps: Math.max(0, result.trainSteps - (hadBc ? 1 : 0)),
    bcDemos: config.policy.bcWarmStartEpisodes,
    evalEpisodes: evals.reduce((a, e) => a + e.episodes + (e.sampledEpisodes ?? 0), 0),
    bcPhaseSeconds,
    rlPhaseSeconds: bcPhaseSeconds === null ? null : result.wallMs / 1000 - bcPhaseSeconds,
    campaignSeconds: result.wallMs / 1000,
    targetMet,
  };
}

const pct = (v: number | undefined): string => (v === undefined ? 'n/a' : `${(v * 100).toFixed(0)}%`);
const families = (p: Record<string, number> | undefined): string =>
  p
    ? Object.entries(p)
        .map(([k, v]) => `${k} ${pct(v)}`)
        .join(', ')
    : '';
/** "greedy 62% (click-target 100%, click-colour 25%) | T=1 27% (…)" */
export function evalLine(e: EvalPoint): string {
  const sampled =
    e.sampledSuccessRate !== undefined
      ? ` | temperature 1: ${pct(e.sampledSuccessRate)} (${families(e.sampledPerFamily)})`
      : '';
  const nFamilies = Math.max(1, Object.keys(e.perFamily).length);
  const greedyPerFamily = e.episodesPerFamily
    ? Math.min(...Object.values(e.episodesPerFamily))
    : Math.round(e.episodes / nFamilies);
  // Temperature 1 may run on fewer seeds than greedy (eval.sampledEpisodesPerTask): say so when it does.
  const sampledPerFamily =
    e.sampledEpisodes !== undefined ? Math.round(e.sampledEpisodes / nFamilies) : greedyPerFamily;
  const counts =
    sampledPerFamily === greedyPerFamily
      ? `${greedyPerFamily} episodes per family`
      : `${greedyPerFamily} greedy + ${sampledPerFamily} temperature-1 episodes per family`;
  return `greedy ${pct(e.successRate)} (${families(e.perFamily)})${sampled} [v${e.version}, ${counts}]`;
}

/** An evaluation as the benchmarks record it (seconds, greedy and temperature 1 side by side). */
export function evalPointRecord(e: EvalPoint) {
  return {
    version: e.version,
    atEpisodes: e.atEpisodes,
    atSeconds: e.atMs / 1000,
    success: e.successRate,
    perFamily: e.perFamily,
    sampledSuccess: e.sampledSuccessRate ?? null,
    sampledPerFamily: e.sampledPerFamily ?? null,
    evalEpisodes: e.episodes,
    sampledEvalEpisodes: e.sampledEpisodes ?? 0,
  };
}

/** The summary's lines about learning (BC start, RL lift, episodes, time), as `npm start` prints them. */
export function breakdownLines(config: CampaignConfig, b: QuickstartBreakdown): string[] {
  const lines: string[] = [];
  const signed = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(0)}`;
  lines.push(
    `BC start:   ${
      b.bcStart
        ? `${evalLine(b.bcStart)} — ${b.bcDemos} oracle demos × ${config.policy.bcEpochs} epochs`
        : config.policy.bcWarmStartEpisodes > 0
          ? 'not evaluated (the behaviour-cloned version has no evaluation of its own; no RL lift can be stated)'
          : 'n/a (no behaviour-cloning warm start)'
    }`
  );
  lines.push(`after RL:   ${b.final ? evalLine(b.final) : 'n/a'}`);
  if (b.liftPoints)
    lines.push(
      `RL lift:    ${signed(b.liftPoints.greedy)} points greedy (${Object.entries(b.liftPoints.perFamily)
        .map(([f, v]) => `${f} ${signed(v)}`)
        .join(
          ', '
        )})${b.liftPoints.sampled !== null ? `, ${signed(b.liftPoints.sampled)} points at temperature 1` : ''}`
    );
  const target = config.campaign.targetSuccess;
  if (target !== undefined)
    lines.push(
      `stop rule:  ≥ ${pct(target)} greedy on every family in ${config.campaign.targetConsecutiveEvals} consecutive evaluations of ≥ ${config.campaign.targetMinEpisodesPerFamily} held-out episodes per family: ${b.targetMet ? 'met' : 'NOT met'}`
    );
  lines.push(
    `episodes:   ${b.rlEpisodes} RL rollout episodes in ${b.rlTrainSteps} RL train steps; ${b.bcDemos} BC demos; ${b.evalEpisodes} evaluation episodes (greedy + temperature 1)`
  );
  lines.push(
    b.bcPhaseSeconds === null || b.rlPhaseSeconds === null
      ? `time:       campaign ${(b.campaignSeconds / 60).toFixed(1)} min (BC and RL phases not timed: the BC version was not evaluated)`
      : `time:       BC warm start ${(b.bcPhaseSeconds / 60).toFixed(1)} min (demos, cloning, first evaluations), RL ${(b.rlPhaseSeconds / 60).toFixed(1)} min, campaign ${(b.campaignSeconds / 60).toFixed(1)} min`
  );
  return lines;
}

/**
 * Learning curve of a campaign's evaluations: greedy overall and per family, temperature 1 overall, vs wall
 * time or vs rollout episodes; a vertical grey line where RL starts (the BC start's evaluation).
 */
export function campaignCurveSvg(
  evals: readonly EvalPoint[],
  x: 'minutes' | 'episodes',
  title: string,
  rlStart?: EvalPoint,
  target = 0.9
): string {
  const xOf = (e: EvalPoint) => (x === 'minutes' ? e.atMs / 60_000 : e.atEpisodes);
  const families = [...new Set(evals.flatMap((e) => Object.keys(e.perFamily)))];
  const sampled = (evals as EvalPoint[]).filter((e) => e.sampledSuccessRate !== undefined);
  return lineChartSvg(
    [
      { name: 'held-out greedy (all)', points: evals.map((e) => [xOf(e), e.successRate] as [number, number]) },
      ...families.map((f) => ({
        name: `greedy ${f}`,
        points: evals.map((e) => [xOf(e), e.perFamily[f] ?? 0] as [number, number]),
      })),
      ...(sampled.length
        ? [
            {
              name: 'temperature 1 (all)',
              points: sampled.map((e) => [xOf(e), e.sampledSuccessRate!] as [number, number]),
            },
          ]
        : []),
    ],
    {
      title,
      xLabel: x === 'minutes' ? 'wall time since campaign start (minutes)' : 'RL rollout episodes',
      yLabel: 'success rate',
      yMin: 0,
      yMax: 1,
      hLines: [{ y: target, label: `${Math.round(target * 100)}% target` }],
      vLines: rlStart ? [{ x: xOf(rlStart), label: `RL starts (BC start v${rlStart.version})`, color: '#888888' }] : [],
    }
  );
}
