/**
 * One real dartflow campaign on the 11 easy MiniWoB++ tasks (suite `miniwob-easy`): the embedded CNN,
 * real Chromium with the real MiniWoB++ pages, BC warm start from oracle demos on train seeds, then DART's
 * step-wise GRPO, held-out evaluations (greedy and temperature 1 on the same seeds) until campaign.maxMinutes.
 * It runs on a private bench cluster (own Temporal namespace and MinIO bucket, every role a local child
 * process: bench/lib/bench-cluster.ts), so other campaigns on the same servers are not disturbed.
 *
 * The config is configs/quickstart.yaml's (the trainer settings of `npm start`) with the overrides below.
 */
import os from 'node:os';
import path from 'node:path';
import { loadCampaignConfig } from '../../config/load';
import { PROJECT_ROOT } from '../../infra/settings';
import type { CampaignStatus, EvalPoint } from '../../schemas/campaign';
import type { CampaignConfig } from '../../schemas/config';
import type { CampaignResult } from '../../workflows/campaign';
import { benchSuffix, startBenchCluster } from './bench-cluster';

export interface MiniwobCampaignOptions {
  /** campaign.maxMinutes: wall minutes from campaign start (BC phase and evaluations included). */
  minutes: number;
  /** Oracle demonstrations for behaviour cloning (8 per task group, tasks in suite order). */
  bcDemos: number;
  bcEpochs: number;
  /** Held-out greedy episodes per task per evaluation (as many again at temperature 1). */
  episodesPerTask: number;
  /** Evaluate every this many new versions during RL (v0, the BC start and the final one always run). */
  evalEveryVersions: number;
  /** More `section.field=value` overrides, applied last. */
  extra: string[];
}

export const MINIWOB_CAMPAIGN_DEFAULTS: MiniwobCampaignOptions = {
  minutes: 25,
  bcDemos: 176,
  bcEpochs: 30,
  episodesPerTask: 20,
  evalEveryVersions: 25,
  extra: [],
};

/** The overrides on top of configs/quickstart.yaml, in order (recorded in the JSON). */
export function miniwobCampaignOverrides(id: string, o: MiniwobCampaignOptions): string[] {
  return [
    `campaign.id=${id}`,
    'campaign.suite=miniwob-easy',
    // The task turns and rewards its published runs had (the quickstart's signal turns and step discount came later).
    'rollout.taskTurns=round-robin',
    'rollout.solvedTaskEvery=1',
    'curation.stepDiscount=1',
    // … and the network (the quickstart's hue channels came later too).
    'policy.hueInput=false',
    `campaign.maxMinutes=${o.minutes}`,
    // Time-bound: the step count never stops it first.
    'campaign.maxTrainSteps=100000',
    `campaign.targetMinEpisodesPerFamily=${o.episodesPerTask}`,
    // enter-password needs up to 8 steps (the task files' own budgets: 4 for one click, 6 and 8 for typing).
    'rollout.maxSteps=8',
    `policy.bcWarmStartEpisodes=${o.bcDemos}`,
    `policy.bcEpochs=${o.bcEpochs}`,
    `eval.episodesPerTask=${o.episodesPerTask}`,
    `eval.everyVersions=${o.evalEveryVersions}`,
    `eval.gateEveryVersions=${o.evalEveryVersions}`,
    ...o.extra,
  ];
}

export function miniwobCampaignConfig(id: string, o: MiniwobCampaignOptions): CampaignConfig {
  return loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml'), miniwobCampaignOverrides(id, o));
}

export interface LoadSample {
  atSeconds: number;
  load1: number;
  episodes: number;
  trainSteps: number;
  phase: string;
}

export interface MiniwobCampaignRun {
  config: CampaignConfig;
  overrides: string[];
  result: CampaignResult;
  /** Status samples every ~15 s (load average, episodes, train steps) while the campaign ran. */
  samples: LoadSample[];
  totalWallSeconds: number;
  workers: string[];
  /** Set when the run had to end without the campaign's result (the outputs then say why). */
  notes?: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (v: number | undefined) => (v === undefined ? '–' : `${Math.round(v * 100)}%`);

function progressLine(st: CampaignStatus, t0: number): string {
  const e: EvalPoint | null = st.lastEval;
  return (
    `  [${((Date.now() - t0) / 60_000).toFixed(1)} min] ${st.phase} v${st.policyVersion}: ${st.episodes} RL episodes, ` +
    `${st.trainSteps} train steps, ${st.episodesInFlight} in flight` +
    (e ? `; last eval v${e.version} greedy ${pct(e.successRate)}, T=1 ${pct(e.sampledSuccessRate)}` : '') +
    `; load ${os.loadavg()[0]!.toFixed(1)}`
  );
}

export async function runMiniwobCampaign(
  o: MiniwobCampaignOptions,
  log: (line: string) => void = (l) => console.log(l)
): Promise<MiniwobCampaignRun> {
  const id = `bench-miniwob-${benchSuffix()}`;
  const overrides = miniwobCampaignOverrides(id, o);
  const config = miniwobCampaignConfig(id, o);
  const started = Date.now();
  const cluster = await startBenchCluster('miniwob', {
    envWorkers: 1,
    envSlots: 4,
    envKind: 'browser',
    policyServers: 1,
    // A port block of its own (another campaign's policy server may hold the default 8700).
    policyBasePort: 8600 + Math.floor(Math.random() * 90),
    metricsPort: 0,
  });
  const workers = cluster.workers.children.map((c) => c.name);
  log(`[bench miniwob] campaign ${id}: ${overrides.slice(1).join(' ')}; workers ${workers.join(', ')}`);
  const samples: LoadSample[] = [];
  try {
    const campaign = await cluster.client.startCampaign(config);
    let done = false;
    const resultP = campaign.result().finally(() => {
      done = true;
    });
    const stopAt = Date.now() + (o.minutes + 20) * 60_000;
    const giveUpAt = stopAt + 15 * 60_000;
    let stopSent = false;
    while (!done) {
      await Promise.race([sleep(15_000), resultP.catch(() => undefined)]);
      if (done) break;
      const st = await campaign.status().catch(() => null);
      if (st) {
        samples.push({
          atSeconds: (Date.now() - started) / 1000,
          load1: os.loadavg()[0]!,
          episodes: st.episodes,
          trainSteps: st.trainSteps,
          phase: st.phase,
        });
        log(progressLine(st, started));
      }
      if (!stopSent && Date.now() > stopAt) {
        stopSent = true;
        log(`[bench miniwob] ${id} still running ${o.minutes + 20} min after start: asking it to stop`);
        await campaign.stop().catch(() => undefined);
      }
      if (Date.now() > giveUpAt) {
        // Keep what was measured: the evaluations finished so far, from the workflow's own state.
        const last = await campaign.status();
        log(`[bench miniwob] ${id}: no result ${o.minutes + 35} min after start; keeping the evaluations so far`);
        const result: CampaignResult = {
          campaignId: last.campaignId,
          policyVersion: last.policyVersion,
          episodes: last.episodes,
          trainSteps: last.trainSteps,
          finalEval: last.evals.at(-1) ?? null,
          evals: last.evals,
          infraFailures: last.infraFailures,
          wallMs: Date.now() - last.startedAtMs,
        };
        const notes = [
          `The campaign had not completed ${o.minutes + 35} min after the start (phase ${last.phase}): the outputs use the ${last.evals.length} evaluations finished by then; the evaluation of the last version is missing.`,
        ];
        return { config, overrides, result, samples, totalWallSeconds: (Date.now() - started) / 1000, workers, notes };
      }
    }
    const result = await resultP;
    return { config, overrides, result, samples, totalWallSeconds: (Date.now() - started) / 1000, workers };
  } finally {
    await cluster.close();
  }
}
