/**
 * `npm run bench -- vlm` (issue 13.4): a VLM campaign end to end on this CPU machine, offline, every part
 * real — a Qwen2-VL-architecture model built by the project's own script (random init, local tokenizer),
 * two vLLM servers (dartflow's vLLM roles, one CPU core each), a Chromium env worker on click-target and
 * click-colour, the Python trainer worker on `trainer-vlm`, Temporal and MinIO. The campaign clones
 * UI-TARS-text demonstrations of the task oracle (behaviour cloning), then runs DART RL until the time
 * limit or until held-out greedy success is ≥ the target on both families in two consecutive evaluations.
 *
 * Then, with the campaign over and the servers serving its last version, rollout tokens/s:
 * - through dartflow's episode loop: an evaluation workflow (Temporal → env worker → Chromium → UI-TARS
 *   prompt → vLLM front → vLLM) of greedy held-out episodes on the env worker's --envs slots;
 * - the same vLLM servers driven directly (no front, no env, no Temporal) with exactly the prompts that
 *   loop sent (read back from MinIO), each to the server that answered it in the loop (its prefixes and
 *   images cached there as in the loop), greedy, same token budget and bias: once with one client loop per
 *   vLLM batch slot, once with as many client loops as the episode loop had env slots (its concurrency);
 *   the headline ratio is against the faster of the two. vLLM's running/waiting gauges are sampled every
 *   250 ms in each window (how full each engine's batch was).
 * Both sides get the same vLLM batch: each server runs with `--max-num-seqs` --seqs (requests over it wait
 * in vLLM's queue). The loop has more episodes in flight (--envs) than vLLM batch slots, as DART's rollout
 * service has more envs than inference slots, so a slot whose episode is stepping its env is taken by
 * another episode's request. vLLM's prefix, multimodal and encoder caches are emptied before each window
 * (the direct drive replays the loop's very prompts: it would find them cached). Envs and inference share
 * 2 cores here (DART runs them on separate machines): vLLM's threads and its own sessions' autogroups run at
 * --vllm-nice (10), the env worker and its Chromium at --env-nice (0), so the envs go first. Greedy decoding
 * makes both sides generate the same tokens, so the ratio is the loop's overhead alone. Each window's
 * steady-state tokens/s (the middle 80 % of its tokens) is reported beside its whole-window rate. Unless
 * --single-round, each set runs in two rounds, the second in mirrored order (loop, direct, direct; then
 * direct, direct, loop), and the ratio pools both: a drift over the set weighs on both sides alike.
 *
 * On this machine the loop's own processes (Chromium, env worker, Temporal, MinIO) share the 2 cores with
 * vLLM. So, where the machine allows a cgroup CPU quota (root), the three windows run a second time with
 * vLLM's processes held to --vllm-cores (default 1.5) in every window: vLLM gets the same compute in the
 * loop and in the direct drive, as on an inference machine of its own, and the env side the rest. A quota
 * still shares cores (time slices, L1/L2 caches, wake-ups) with the env side; so, where the machine allows
 * cpusets, the three windows run a third time with vLLM's processes on --vllm-cpus (default: the last CPU)
 * and every other process of the bench (workers, Chromium, fronts, direct client, Temporal, MinIO) on the
 * other CPUs: inference and envs on cores of their own, as on separate machines.
 *
 * Writes vlm.json and vlm-vs-{time,episodes}.png, vlm-systems.png to the bench output directory (docs/bench
 * with --publish).
 * Run: npm run bench -- vlm [--minutes 30] [--size tiny|small|base] [--bc 256] [--bc-epochs 8] [--envs 8] [--seqs 2] [--env-nice 0] [--vllm-nice 10]
 *      [--eval-episodes 32] [--eval-every 3] [--throughput-episodes 32] [--skip-throughput] [--single-round] [--vllm-cores 1.5 (0: no capped windows)] [--coload-cores 0]
 *      [--vllm-cpus last|none|1,2 (CPUs of vLLM's own in the third set)]
 *      [section.field=value ...]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { tsToMs } from '@temporalio/common/lib/time';
import { startLocalWorkers, type LocalWorkers } from '../cli/local-workers';
import { DartflowClient } from '../client/dartflow-client';
import { applyOverride, parseCampaignConfig } from '../config/load';
import { buildTinyModel } from '../infra/vlm-python';
import { processTree, vlmPython, VLM_VENV } from '../infra/vllm';
import { loadInfraSettings } from '../infra/settings';
import { barChartSvg, writeSvgAsPng } from '../lib/charts';
import { resolvePolicyToken } from '../rollout/token';
import type { EvalPoint } from '../schemas/campaign';
import type { CampaignConfig } from '../schemas/config';
import { LedgerEntrySchema } from '../schemas/records';
import { keys } from '../storage/keys';
import { ObjectStore } from '../storage/object-store';
import { startVllmPolicyServer, type VllmPolicyServerHandle } from '../workers/vllm-policy-server';
import {
  bcStartEval,
  breakdownLines,
  campaignCurveSvg,
  evalLine,
  evalPointRecord,
  quickstartBreakdown,
} from '../scripts/lib/quickstart-campaign';
import {
  createCpuCap,
  createCpuSet,
  niceAutogroups,
  niceThreads,
  onlineCpus,
  type CpuCap,
  type CpuSet,
} from './lib/cpu-cap';
import { benchOutDir, shownPath } from './lib/output';
import {
  measureRolloutThroughput,
  type RolloutThroughput,
  type ThroughputContext,
  type VllmPlacement,
} from './lib/vlm-throughput';
import { reloadLatencyByServer, reloadSamples, trainerTiming, type RolloutEvent } from './lib/vlm-metrics';

const SERVER_IDS = ['vlm-a', 'vlm-b'];
const SUITE = 'quickstart'; // click-target + click-colour
const TARGET = 0.8;

interface VlmBenchOptions {
  minutes: number;
  size: string;
  bc: number;
  bcEpochs: number;
  envs: number;
  seqs: number;
  envNice: number;
  /** Niceness of every vLLM thread (API servers, engines) for the whole bench; 0 = normal. */
  vllmNice: number;
  evalEpisodes: number;
  evalEvery: number;
  throughputEpisodes: number;
  skipThroughput: boolean;
  /** Each set of throughput windows in two rounds, the second in mirrored order (loop last); false: one round. */
  mirroredWindows: boolean;
  maxTokens: number;
  maxPixels: number;
  /** CPU cap (cores) for vLLM's processes in the second set of throughput windows; 0 = no second set. */
  vllmCores: number;
  /** Diagnostic: cores of memory-streaming co-load beside vLLM in a fourth, capped direct window (0 = none). */
  coloadCores: number;
  /** CPUs of vLLM's own in the third set of throughput windows (the rest of the bench on the others); [] = no third set. */
  vllmCpus: number[];
  overrides: string[];
}

function parseOptions(args: string[]): VlmBenchOptions {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      minutes: { type: 'string', default: '30' },
      size: { type: 'string', default: 'tiny' },
      bc: { type: 'string', default: '256' },
      'bc-epochs': { type: 'string', default: '8' },
      envs: { type: 'string', default: '8' },
      seqs: { type: 'string', default: '2' },
      'env-nice': { type: 'string', default: '0' },
      'vllm-nice': { type: 'string', default: '10' },
      'eval-episodes': { type: 'string', default: '32' },
      'eval-every': { type: 'string', default: '3' },
      'throughput-episodes': { type: 'string', default: '32' },
      'skip-throughput': { type: 'boolean', default: false },
      'single-round': { type: 'boolean', default: false },
      'max-tokens': { type: 'string', default: '32' },
      'max-pixels': { type: 'string', default: String(36 * 28 * 28) },
      'vllm-cores': { type: 'string', default: '1.5' },
      'coload-cores': { type: 'string', default: '0' },
      'vllm-cpus': { type: 'string', default: 'last' },
    },
  });
  const num = (name: string, v: string | undefined, min: number): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name}: got ${JSON.stringify(v)}; give a number ≥ ${min}`);
    return n;
  };
  const bad = positionals.find((p) => !p.includes('='));
  if (bad)
    throw new Error(`unknown argument ${JSON.stringify(bad)}: options are --name value, overrides section.field=value`);
  return {
    minutes: num('minutes', values.minutes, 1),
    size: values.size ?? 'tiny',
    bc: num('bc', values.bc, 0),
    bcEpochs: num('bc-epochs', values['bc-epochs'], 1),
    envs: num('envs', values.envs, 1),
    seqs: num('seqs', values.seqs, 1),
    envNice: num('env-nice', values['env-nice'], 0),
    vllmNice: num('vllm-nice', values['vllm-nice'], 0),
    evalEpisodes: num('eval-episodes', values['eval-episodes'], 1),
    evalEvery: num('eval-every', values['eval-every'], 1),
    throughputEpisodes: num('throughput-episodes', values['throughput-episodes'], 1),
    skipThroughput: values['skip-throughput'] ?? false,
    mirroredWindows: !(values['single-round'] ?? false),
    maxTokens: num('max-tokens', values['max-tokens'], 8),
    maxPixels: num('max-pixels', values['max-pixels'], 4 * 28 * 28),
    vllmCores: num('vllm-cores', values['vllm-cores'], 0),
    coloadCores: num('coload-cores', values['coload-cores'], 0),
    vllmCpus: cpuList(values['vllm-cpus'] ?? 'last'),
    overrides: positionals,
  };
}

/** --vllm-cpus: "last" (the last online CPU, on a machine with ≥ 2), "none", or a list such as "1" or "2,3". */
function cpuList(v: string): number[] {
  const online = onlineCpus();
  if (v === 'none') return [];
  if (v === 'last') return online.length >= 2 ? [online[online.length - 1]!] : [];
  const cpus = v.split(',').map((x) => Number(x.trim()));
  const wrong = cpus.filter((c) => !Number.isInteger(c) || !online.includes(c));
  if (wrong.length > 0 || cpus.length >= online.length)
    throw new Error(
      `--vllm-cpus: got ${JSON.stringify(v)}; give "last", "none" or some (not all) of the online CPUs ${online.join(',')}`
    );
  return cpus;
}

/** The campaign this benchmark runs; every field it does not set has DART's default (docs/configuration.md). */
function benchConfig(id: string, o: VlmBenchOptions, logitBias: Record<string, number>): CampaignConfig {
  const input: Record<string, unknown> = {
    campaign: {
      id,
      suite: SUITE,
      maxTrainSteps: 100_000,
      maxMinutes: o.minutes,
      targetSuccess: TARGET,
      targetConsecutiveEvals: 2,
      targetMinEpisodesPerFamily: o.evalEpisodes,
    },
    // 2 groups of 8 per env slot pool of 4: the slots stay busy while a group waits for its slowest episode.
    // Both tasks take one click: a budget of 2 leaves one retry and keeps RL samples (whose prompts carry
    // every screenshot so far) cheap to re-score on a CPU.
    rollout: { envConcurrency: 4 * o.envs, maxSteps: 2 },
    // A random-init model solves nothing at first: all-failed groups train only with a pooled success in
    // them (DART §3.4 c), so the pool is filled with UI-TARS demonstrations before RL (§4.8).
    curation: { experiencePool: true, precollect: true, precollectSuccessesPerTask: 4 },
    trainer: {
      // A random-init transformer needs a BC rate far above DART's 1e-6 for a pretrained 7B model; RL takes
      // smaller steps from the cloned start, anchored to it by DART's KL (β 0.1).
      learningRate: 2e-3,
      rlLearningRate: 2e-4,
      weightDecay: 0.1,
      minGroups: 2,
      maxGroups: 4,
      minibatchSize: 8,
    },
    policy: {
      kind: 'vlm',
      vlmModel: 'dartflow',
      servers: SERVER_IDS.length,
      bcWarmStartEpisodes: o.bc,
      bcEpochs: o.bcEpochs,
      // A random-init model must never answer with vision special tokens (the trainer could not re-score
      // them); the screen is cut to at most maxPixels (UI-TARS smart-resize, factor 28).
      options: { maxTokens: o.maxTokens, topLogprobs: 2, logitBias, minPixels: 4 * 28 * 28, maxPixels: o.maxPixels },
    },
    eval: {
      everyVersions: o.evalEvery,
      episodesPerTask: o.evalEpisodes,
      sampledEpisodesPerTask: Math.max(1, Math.round(o.evalEpisodes / 4)),
      gateEveryVersions: 0,
    },
    env: { kind: 'browser', slotsPerWorker: o.envs },
  };
  for (const ov of o.overrides) applyOverride(input, ov);
  return parseCampaignConfig(input, 'bench vlm config');
}

/** Every completed reloadPolicy of the campaign's model rollouts, from their Temporal histories. */
async function reloadEvents(client: DartflowClient, campaignId: string): Promise<RolloutEvent[][]> {
  const out: RolloutEvent[][] = [];
  for await (const wf of client.temporal.workflow.list({ query: `WorkflowType = 'modelRolloutWorkflow'` })) {
    if (!wf.workflowId.startsWith(`${campaignId}-rollout-`)) continue;
    const history = await client.temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    const events: RolloutEvent[] = [];
    for (const e of history.events ?? []) {
      const at = tsToMs(e.eventTime);
      const s = e.activityTaskScheduledEventAttributes;
      const c = e.activityTaskCompletedEventAttributes;
      if (s)
        events.push({
          kind: 'scheduled',
          eventId: String(e.eventId),
          at,
          taskQueue: s.taskQueue?.name ?? '',
          activity: s.activityType?.name ?? '',
        });
      else if (c) {
        const p = c.result?.payloads?.[0];
        events.push({
          kind: 'completed',
          scheduledEventId: String(c.scheduledEventId),
          at,
          result: p ? defaultPayloadConverter.fromPayload(p as Payload) : null,
        });
      }
    }
    out.push(events);
  }
  return out;
}

export async function benchVlm(args: string[]): Promise<void> {
  const o = parseOptions(args);
  if (!vlmPython())
    throw new Error(`bench vlm needs the VLM environment at ${VLM_VENV}: run \`bash infra/install-vlm.sh\``);
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings);
  await store.ensureBucket();
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const campaignId = `bench-vlm-${stamp}`;
  const work = path.join(settings.dataDir, 'bench-vlm', stamp);
  const modelDir = path.join(work, 'model');
  const log = (line: string) => console.log(`[bench vlm ${new Date().toISOString().slice(11, 19)}] ${line}`);

  const built = await buildTinyModel(modelDir, 0, o.size);
  log(`model: Qwen2-VL architecture, ${o.size}, ${built.parameters.toLocaleString('en')} parameters (${modelDir})`);
  const logitBias = Object.fromEntries(built.special_token_ids.map((id) => [String(id), -100]));
  const config = benchConfig(campaignId, o, logitBias);
  const token = resolvePolicyToken({ defaultFile: path.join(settings.dataDir, 'policy-token'), create: true });

  const servers: VllmPolicyServerHandle[] = [];
  let workers: LocalWorkers | undefined;
  let client: DartflowClient | undefined;
  try {
    // Both servers start together (about a minute each on CPU); each vLLM engine gets a core of its own
    // (by default both would bind core 0).
    const startedAt = Date.now();
    servers.push(
      ...(await Promise.all(
        SERVER_IDS.map((serverId, i) =>
          startVllmPolicyServer({
            settings,
            serverId,
            token,
            store,
            vllm: {
              kind: 'start',
              maxModelLen: 4096,
              // vLLM batches at most this many requests per server; the rest wait in its queue. The
              // throughput comparison holds it equal on both sides.
              maxNumSeqs: o.seqs,
              env: { VLLM_CPU_OMP_THREADS_BIND: String(i % Math.max(1, os.cpus().length)) },
            },
            initial: { modelDir, version: 0, campaignId },
            cacheDir: path.join(work, 'cache', serverId),
          })
        )
      ))
    );
    if (o.vllmNice !== 0) {
      const pids = servers.flatMap((sv) => (sv.vllm ? processTree(sv.vllm.pid) : []));
      // Where sessions are autogroups, a thread's niceness weighs only inside its session: vLLM's own
      // sessions (each server is one) get the niceness too.
      const groups = niceAutogroups(pids, o.vllmNice);
      log(
        `vLLM at nice ${o.vllmNice}: ${niceThreads(pids, o.vllmNice)} threads of ${pids.length} processes; autogroups ${JSON.stringify(groups)}`
      );
    }
    log(
      `vLLM servers up in ${((Date.now() - startedAt) / 1000).toFixed(0)} s: ${servers.map((s) => `${s.serverId} ${s.url}`).join(', ')}`
    );
    workers = startLocalWorkers(settings, {
      roles: ['orchestrator', 'env', 'trainer-vlm'],
      envWorkers: 1,
      envSlots: o.envs,
      envKind: 'browser',
      // Envs and inference share 2 cores here (DART runs them on separate machines): the envs go first
      // (--vllm-nice), so an episode's turn is not kept waiting behind vLLM's busy engines and vLLM stays fed.
      niceness: { env: o.envNice },
      vlmBaseModel: modelDir,
      logDir: path.join(work, 'logs'),
    });
    client = await DartflowClient.connect(settings);

    // --- the campaign: BC warm start, then DART RL ---
    const campaign = await client.startCampaign(config);
    log(
      `campaign ${campaignId}: ${o.bc} UI-TARS demos × ${o.bcEpochs} epochs, then RL for up to ${o.minutes} min (logs in ${path.join(work, 'logs')})`
    );
    let seenEvals = 0;
    const progress = setInterval(() => {
      void campaign
        .status()
        .then((st) => {
          for (const e of st.evals.slice(seenEvals)) log(`eval ${evalLine(e)} at ${(e.atMs / 60_000).toFixed(1)} min`);
          seenEvals = st.evals.length;
          log(
            `${st.phase}: v${st.policyVersion}, ${st.trainSteps} train steps, ${st.episodes} episodes, ${st.episodesInFlight} in flight`
          );
        })
        .catch(() => undefined);
    }, 60_000);
    const result = await campaign.result().finally(() => clearInterval(progress));
    const status = await campaign.status();
    const evals = result.evals as EvalPoint[];
    const breakdown = quickstartBreakdown(config, result);
    for (const line of breakdownLines(config, breakdown)) log(line);

    const ledger = await Promise.all(
      (await store.list(keys.ledgerPrefix(campaignId))).map((k) => store.getJson(k, LedgerEntrySchema))
    );
    const trainer = trainerTiming(
      ledger.map((e) => ({ ...e, consumed: e.consumed.length })),
      config.policy.bcWarmStartEpisodes > 0
    );
    const reloads = reloadSamples((await reloadEvents(client, campaignId)).flat());
    const reloadByServer = reloadLatencyByServer(reloads);
    log(`trainer: ${JSON.stringify(trainer)}`);
    log(`reloads: ${JSON.stringify(reloadByServer)}`);

    // --- rollout tokens/s: dartflow's episode loop, then the same servers directly ---
    // Twice when the machine allows a CPU cap: with every process sharing the cores (as they run here), then
    // with vLLM held to --vllm-cores in all three windows, as on an inference machine of its own.
    let colocated: RolloutThroughput | null = null;
    let capped: RolloutThroughput | null = null;
    let capSkipped: string | null = null;
    let ownCpus: RolloutThroughput | null = null;
    let ownCpusSkipped: string | null = null;
    if (!o.skipThroughput) {
      const ctx: ThroughputContext = {
        client,
        store,
        servers,
        workers,
        suite: SUITE,
        policyVersion: result.policyVersion,
        policyOptions: config.policy.options,
        throughputEpisodes: o.throughputEpisodes,
        mirroredWindows: o.mirroredWindows,
        envs: o.envs,
        seqs: o.seqs,
        maxTokens: o.maxTokens,
        logitBias,
        log,
      };
      colocated = await measureRolloutThroughput(ctx, `${campaignId}-throughput`);
      if (o.vllmCores > 0) {
        let cap: CpuCap | null = null;
        try {
          cap = createCpuCap(`dartflow-bench-vllm-${process.pid}`, o.vllmCores);
        } catch (err) {
          capSkipped = (err as Error).message;
          log(`windows with vLLM held to ${o.vllmCores} cores skipped: ${capSkipped}`);
        }
        if (cap) {
          log(`the three windows again with vLLM held to ${o.vllmCores} cores (${cap.path})`);
          capped = await measureRolloutThroughput(
            { ...ctx, coloadCores: o.coloadCores },
            `${campaignId}-throughput-capped`,
            { label: `vLLM held to ${o.vllmCores} cores`, vllm: cap, vllmCores: o.vllmCores }
          );
        }
      }
      if (o.vllmCpus.length > 0) {
        let placement: VllmPlacement | null = null;
        const restCpus = onlineCpus().filter((c) => !o.vllmCpus.includes(c));
        let vllmSet: CpuSet | null = null;
        try {
          vllmSet = createCpuSet(`dartflow-bench-vllm-cpus-${process.pid}`, o.vllmCpus);
          placement = {
            label: `vLLM on CPU ${o.vllmCpus.join(',')}, the rest on CPU ${restCpus.join(',')}`,
            vllm: vllmSet,
            rest: createCpuSet(`dartflow-bench-rest-cpus-${process.pid}`, restCpus),
          };
        } catch (err) {
          vllmSet?.release(); // made before the second set failed: not left behind
          ownCpusSkipped = (err as Error).message;
          log(`windows with vLLM on CPUs of its own skipped: ${ownCpusSkipped}`);
        }
        if (placement) {
          log(`the three windows again with ${placement.label}`);
          ownCpus = await measureRolloutThroughput(ctx, `${campaignId}-throughput-own-cpus`, placement);
        }
      }
    }

    // --- results ---
    const dir = benchOutDir();
    const reached = evals.find((e) => Object.values(e.perFamily).every((v) => v >= TARGET));
    const out = {
      measuredAt: new Date().toISOString(),
      machine: `${os.cpus().length}-core x86-64, no GPU; load average at the end ${os.loadavg()[0]!.toFixed(2)}`,
      command: `npm run bench -- vlm ${args.join(' ')}`.trim(),
      simulated: 'nothing: real Chromium pages, real vLLM (CPU), real PyTorch trainer, Temporal and MinIO',
      model: {
        architecture: 'Qwen2VLForConditionalGeneration',
        size: o.size,
        parameters: built.parameters,
        init: 'random',
      },
      campaignId,
      config,
      episodes: result.episodes,
      trainSteps: result.trainSteps,
      policyVersion: result.policyVersion,
      rolledBack: status.rolledBack,
      infraFailures: result.infraFailures,
      campaignWallSeconds: result.wallMs / 1000,
      breakdown,
      target: {
        goal: `RL lifts held-out greedy success by ≥ 25 points over the BC start and ends ≥ ${TARGET * 100} % within 30 minutes`,
        liftMet: (breakdown.liftPoints?.greedy ?? 0) >= 25,
        finalMet: breakdown.final ? Object.values(breakdown.final.perFamily).every((v) => v >= TARGET) : false,
        firstReached: reached ? { version: reached.version, atSeconds: reached.atMs / 1000 } : null,
      },
      evals: evals.map(evalPointRecord),
      trainer,
      // Every trainer step as the ledger recorded it (BC first): its timing and loss metrics.
      ledger: ledger
        .sort((a, b) => a.trainStep - b.trainStep)
        .map((e) => ({
          trainStep: e.trainStep,
          fromVersion: e.fromVersion,
          toVersion: e.toVersion,
          trajectories: e.consumed.length,
          injectedFromPool: e.consumed.filter((c) => c.injectedFromPool).length,
          metrics: e.metrics,
        })),
      reloadLatencyMs: reloadByServer,
      reloads,
      // Every process on the shared cores: the loop against the faster direct drive (whole windows and
      // steady state), the direct drives, where the loop's time went, how vLLM was fed, cores by process.
      ...(colocated ?? { throughput: null }),
      // The same three windows with vLLM held to --vllm-cores in each (null: not measured; skipped: why).
      vllmCapped: capped ?? (capSkipped ? { skipped: capSkipped } : null),
      // The same three windows with vLLM on --vllm-cpus and everything else on the other CPUs.
      vllmOwnCpus: ownCpus ?? (ownCpusSkipped ? { skipped: ownCpusSkipped } : null),
    };
    fs.writeFileSync(path.join(dir, 'vlm.json'), JSON.stringify(out, null, 2));
    const title = `VLM campaign (${o.size} Qwen2-VL, ${built.parameters.toLocaleString('en')} params; BC on ${o.bc} demos, then RL) — held-out success`;
    const rlStart = bcStartEval(config, evals);
    for (const x of ['minutes', 'episodes'] as const)
      await writeSvgAsPng(
        campaignCurveSvg(evals, x, title, rlStart, TARGET),
        path.join(dir, `vlm-vs-${x === 'minutes' ? 'time' : 'episodes'}.png`),
        settings.chromiumPath
      );
    const bars = [
      ...Object.entries(reloadByServer).map(([id, r]) => ({
        label: `reload ${id} p50 (s)`,
        value: r.loadMs.p50 / 1000,
      })),
      ...(trainer.rlStepSeconds ? [{ label: 'RL train step p50 (s)', value: trainer.rlStepSeconds.p50 }] : []),
      ...[
        { run: colocated, label: 'shared cores' },
        { run: capped, label: `vLLM at ${o.vllmCores} cores` },
        { run: ownCpus, label: `vLLM on CPU ${o.vllmCpus.join(',')}` },
      ].flatMap(({ run, label }) =>
        run
          ? [
              { label: `steady tokens/s ÷ 10, loop (${label})`, value: run.steady.loop / 10 },
              { label: `steady tokens/s ÷ 10, direct (${label})`, value: run.steady.direct / 10 },
            ]
          : []
      ),
    ];
    if (bars.length)
      await writeSvgAsPng(
        barChartSvg(bars, { title: 'VLM systems figures (CPU, 2 cores)', yLabel: 'seconds, or tokens/s ÷ 10' }),
        path.join(dir, 'vlm-systems.png'),
        settings.chromiumPath
      );
    log(
      `${out.target.liftMet && out.target.finalMet ? 'target met' : 'target NOT met'}; wrote ${shownPath(path.join(dir, 'vlm.json'))}, vlm-vs-{time,episodes}.png, vlm-systems.png`
    );
  } finally {
    await client?.close();
    await workers?.stop();
    await Promise.all(servers.map((s) => s.shutdown()));
  }
}
