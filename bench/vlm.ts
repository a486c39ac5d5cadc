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
 *   loop sent (read back from MinIO), greedy, same token budget and bias: once with one client loop per
 *   vLLM batch slot, once with as many client loops as the episode loop had env slots (its concurrency);
 *   the headline ratio is against the faster of the two. vLLM's running/waiting gauges are sampled every
 *   250 ms in each window (how full each engine's batch was).
 * Both sides get the same vLLM batch: each server runs with `--max-num-seqs` --seqs (requests over it wait
 * in vLLM's queue). The loop has more episodes in flight (--envs) than vLLM batch slots, as DART's rollout
 * service has more envs than inference slots, so a slot whose episode is stepping its env is taken by
 * another episode's request. vLLM's prefix, multimodal and encoder caches are emptied before each window
 * (the direct drive replays the loop's very prompts: it would find them cached). The env worker runs at
 * --env-nice (envs and inference share 2 cores here; DART runs them on separate machines). Greedy decoding
 * makes both sides generate the same tokens, so the ratio is the loop's overhead alone.
 *
 * Writes vlm.json and vlm-vs-{time,episodes}.png, vlm-systems.png to the bench output directory (docs/bench
 * with --publish).
 * Run: npm run bench -- vlm [--minutes 30] [--size tiny|small|base] [--bc 256] [--bc-epochs 8] [--envs 8] [--seqs 2] [--env-nice 10]
 *      [--eval-episodes 32] [--eval-every 3] [--throughput-episodes 32] [--skip-throughput] [section.field=value ...]
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
import { LedgerEntrySchema, StepRecordSchema, TrajectoryManifestSchema } from '../schemas/records';
import { TASK_QUEUES } from '../schemas/task-queues';
import { keys } from '../storage/keys';
import { ObjectStore } from '../storage/object-store';
import { loadSuite } from '../tasks';
import { PromptRecordSchema } from '../vlm/prompt-record';
import type { FrontStats } from '../rollout/vllm/front';
import { startVllmPolicyServer, type VllmPolicyServerHandle } from '../workers/vllm-policy-server';
import type { EvaluateInput } from '../workflows/evaluate';
import {
  bcStartEval,
  breakdownLines,
  campaignCurveSvg,
  evalLine,
  evalPointRecord,
  quickstartBreakdown,
} from '../scripts/lib/quickstart-campaign';
import { benchOutDir, shownPath } from './lib/output';
import { cpuSeconds, serverPids } from './lib/proc-cpu';
import {
  compareThroughput,
  reloadLatencyByServer,
  reloadSamples,
  cacheHitRates,
  runLanes,
  trainerTiming,
  vllmCacheCounters,
  vllmQueueGauges,
  batchOccupancy,
  type VllmCacheCounters,
  type VllmQueueSample,
  type BatchOccupancy,
  type RolloutEvent,
  type ThroughputWindow,
} from './lib/vlm-metrics';

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
  evalEpisodes: number;
  evalEvery: number;
  throughputEpisodes: number;
  skipThroughput: boolean;
  maxTokens: number;
  maxPixels: number;
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
      'env-nice': { type: 'string', default: '10' },
      'eval-episodes': { type: 'string', default: '32' },
      'eval-every': { type: 'string', default: '3' },
      'throughput-episodes': { type: 'string', default: '32' },
      'skip-throughput': { type: 'boolean', default: false },
      'max-tokens': { type: 'string', default: '32' },
      'max-pixels': { type: 'string', default: String(36 * 28 * 28) },
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
    evalEpisodes: num('eval-episodes', values['eval-episodes'], 1),
    evalEvery: num('eval-every', values['eval-every'], 1),
    throughputEpisodes: num('throughput-episodes', values['throughput-episodes'], 1),
    skipThroughput: values['skip-throughput'] ?? false,
    maxTokens: num('max-tokens', values['max-tokens'], 8),
    maxPixels: num('max-pixels', values['max-pixels'], 4 * 28 * 28),
    overrides: positionals,
  };
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

interface RecordedTurn {
  messages: unknown[];
  tokens: number;
  /** The policy server (vLLM front) that answered, as the step record names it. */
  server: string | undefined;
  /** The step's start and end (wall clock, ms): the loop's first request and last answer bound its busy span. */
  startedAt: number;
  endedAt: number;
}

/** Where the episode loop's time went (env activity timing, summed over its episodes), seconds. */
interface LoopBreakdown {
  episodes: number;
  /** Slot leased → trajectory writes started. */
  episodeSeconds: number;
  /** Policy: act() calls (the vLLM request through the front, prompt building, parsing). */
  policySeconds: number;
  /** Env: reset, steps (click + settle), screenshots, evaluation in Chromium. */
  envSeconds: number;
  /** The rest of an episode: screenshot uploads waited for, bookkeeping. */
  otherSeconds: number;
}

/** How the windows fed vLLM: requests per server in the loop, batch occupancy per server, the loop's busy span. */
interface LoopFeeding {
  loopRequestsByServer: Record<string, number>;
  /** Per server (in SERVER_IDS order): vLLM's running/waiting gauges sampled every 250 ms. */
  loopOccupancy: Array<BatchOccupancy | null>;
  /** The direct drive with one client per batch slot, then one per env slot. */
  directOccupancy: Array<BatchOccupancy | null>;
  directAtEnvSlotsOccupancy: Array<BatchOccupancy | null>;
  /** The loop's first step start → last step end, and tokens/s in it (the workflow's start-up and tail left out). */
  loopBusySeconds: number;
  loopBusyTokensPerSecond: number;
  /** Mean seconds per loop request: in act() on the env side, in the front, and in vLLM (the front's forward). */
  loopSecondsPerRequest: { act: number | null; front: number | null; vllm: number | null };
}

function loopFeeding(
  turns: readonly RecordedTurn[],
  loop: LoopBreakdown,
  /** The fronts' stats over the loop window, summed over servers. */
  fronts: FrontStats,
  occupancy: Pick<LoopFeeding, 'loopOccupancy' | 'directOccupancy' | 'directAtEnvSlotsOccupancy'>
): LoopFeeding {
  const byServer: Record<string, number> = {};
  for (const t of turns) {
    const server = t.server ?? '(unrecorded)';
    byServer[server] = (byServer[server] ?? 0) + 1;
  }
  const busy =
    turns.length > 0
      ? (Math.max(...turns.map((t) => t.endedAt)) - Math.min(...turns.map((t) => t.startedAt))) / 1000
      : 0;
  const tokens = turns.reduce((a, t) => a + t.tokens, 0);
  const perRequest = (seconds: number, requests: number) =>
    requests > 0 ? Number((seconds / requests).toFixed(3)) : null;
  return {
    loopRequestsByServer: byServer,
    ...occupancy,
    loopBusySeconds: Number(busy.toFixed(1)),
    loopBusyTokensPerSecond: busy > 0 ? Number((tokens / busy).toFixed(1)) : 0,
    loopSecondsPerRequest: {
      act: perRequest(loop.policySeconds, turns.length),
      front: perRequest(fronts.frontMs / 1000, fronts.answered),
      vllm: perRequest(fronts.upstreamMs / 1000, fronts.answered),
    },
  };
}

/** The chat turns an episode loop sent (prompt records from MinIO), how many tokens each answer had, and its timing. */
async function recordedTurns(
  store: ObjectStore,
  campaignId: string
): Promise<{ turns: RecordedTurn[]; breakdown: LoopBreakdown }> {
  const manifests = (await store.list(`campaigns/${campaignId}/trajectories/`)).filter((k) =>
    k.endsWith('manifest.json')
  );
  const turns: RecordedTurn[] = [];
  const b: LoopBreakdown = { episodes: 0, episodeSeconds: 0, policySeconds: 0, envSeconds: 0, otherSeconds: 0 };
  for (const key of manifests) {
    const m = await store.getJson(key, TrajectoryManifestSchema);
    if (m.timing) {
      const wall = (m.timing.writeStartedAt - m.timing.acquiredAt) / 1000;
      b.episodes++;
      b.episodeSeconds += wall;
      b.policySeconds += m.timing.actMs / 1000;
      b.envSeconds += m.timing.envMs / 1000;
      b.otherSeconds += Math.max(0, wall - (m.timing.actMs + m.timing.envMs) / 1000);
    }
    for (const s of await store.getJsonLines(m.stepsKey, StepRecordSchema, m.stepsSha256)) {
      if (!s.promptKey || !s.responseTokenIds) continue;
      const prompt = PromptRecordSchema.parse(JSON.parse((await store.getBytes(s.promptKey)).toString('utf8')));
      turns.push({
        messages: prompt.messages,
        tokens: s.responseTokenIds.length,
        server: s.policyServer,
        startedAt: s.startedAt,
        endedAt: s.endedAt,
      });
    }
  }
  return { turns, breakdown: b };
}

/**
 * CPU seconds so far: the whole machine (busy time from /proc/stat) and the vLLM servers' process trees.
 * On a 2-core machine the episode loop's own processes (Chromium, env worker, Temporal, MinIO) take CPU
 * from vLLM; the difference between the windows says how much.
 */
/**
 * Where the machine's CPU went, by process group: `roots` name process trees (a child and everything it
 * started: the env worker with its Chromium), `single` name one process each (this bench process, which
 * hosts the vLLM fronts and the direct drive's client).
 */
interface CpuGroups {
  vllmRoots: number[];
  roots: Record<string, number>;
  single: Record<string, number | undefined>;
}

interface CpuReading {
  machine: number;
  vllm: number;
  groups: Record<string, number>;
}

function cpuNow(g: CpuGroups): CpuReading {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  const machine = (f.reduce((a, v) => a + v, 0) - idle) / 100; // USER_HZ
  const treeSeconds = (roots: number[]) =>
    roots.flatMap((r) => processTree(r)).reduce((a, pid) => a + (cpuSeconds(pid) ?? 0), 0);
  const groups: Record<string, number> = {};
  for (const [name, root] of Object.entries(g.roots)) groups[name] = treeSeconds([root]);
  for (const [name, pid] of Object.entries(g.single)) groups[name] = pid === undefined ? 0 : (cpuSeconds(pid) ?? 0);
  return { machine, vllm: treeSeconds(g.vllmRoots), groups };
}

/**
 * Cores busy in a window: the vLLM servers, everything else on the machine, and that "else" split by named
 * group (`rest`: processes of no group — the kernel, other work on the machine).
 */
function coresIn(a: CpuReading, b: CpuReading, seconds: number) {
  const c = (x: number) => Number((x / seconds).toFixed(2));
  const other = b.machine - a.machine - (b.vllm - a.vllm);
  const otherBy: Record<string, number> = {};
  let named = 0;
  for (const [name, s] of Object.entries(b.groups)) {
    const d = Math.max(0, s - (a.groups[name] ?? s));
    named += d;
    otherBy[name] = c(d);
  }
  otherBy.rest = c(Math.max(0, other - named));
  return { vllmCores: c(b.vllm - a.vllm), otherCores: c(other), otherBy };
}

/**
 * Empties vLLM's caches (KV prefix cache, multimodal processor and encoder caches; dev-mode endpoints)
 * so each throughput window starts cold. Without it the direct drive, which replays the very prompts the
 * loop sent, finds their images processed and their prefixes cached, and compares a warm server with a
 * cold one.
 */
async function resetVllmCaches(baseUrl: string): Promise<void> {
  for (const route of ['reset_prefix_cache', 'reset_mm_cache', 'reset_encoder_cache']) {
    const res = await fetch(`${baseUrl}/${route}`, { method: 'POST' });
    if (!res.ok) throw new Error(`POST ${baseUrl}/${route}: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
  }
}

async function cacheCountersOf(baseUrls: string[]): Promise<VllmCacheCounters> {
  const texts = await Promise.all(
    baseUrls.map(async (u) => {
      const res = await fetch(`${u}/metrics`);
      if (!res.ok) throw new Error(`GET ${u}/metrics: HTTP ${res.status}`);
      return res.text();
    })
  );
  return vllmCacheCounters(texts);
}

/**
 * Samples each vLLM server's running/waiting gauges every `everyMs` until stopped: how full each engine's
 * batch was in a throughput window (the loop may leave batch slots empty while its episodes step their envs).
 * A tick is skipped while the previous scrape is pending (a busy API server answers late), so samples come
 * every 250–350 ms in practice.
 */
function sampleQueues(baseUrls: string[], everyMs = 250): { stop(): VllmQueueSample[][] } {
  const samples: VllmQueueSample[][] = baseUrls.map(() => []);
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void Promise.all(
      baseUrls.map(async (u, i) => {
        const res = await fetch(`${u}/metrics`, { signal: AbortSignal.timeout(2000) });
        const g = res.ok ? vllmQueueGauges(await res.text()) : null;
        if (g) samples[i]!.push(g);
      })
    )
      .catch(() => undefined)
      .finally(() => (busy = false));
  }, everyMs);
  timer.unref(); // a window that throws must not leave the bench process waiting on this timer
  return {
    stop() {
      clearInterval(timer);
      return samples;
    },
  };
}

/** One direct request, as dartflow's front sends it to vLLM (greedy, logprobs as token ids). */
async function directChat(
  baseUrl: string,
  model: string,
  messages: unknown[],
  o: { maxTokens: number; logitBias: Record<string, number> }
): Promise<number> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages,
      temperature: 0,
      max_tokens: o.maxTokens,
      logprobs: true,
      top_logprobs: 2,
      logit_bias: o.logitBias,
      return_tokens_as_token_ids: true,
    }),
  });
  const body = (await res.json()) as { usage?: { completion_tokens?: number } };
  if (!res.ok || typeof body.usage?.completion_tokens !== 'number')
    throw new Error(`direct vLLM request to ${baseUrl}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body.usage.completion_tokens;
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
    log(
      `vLLM servers up in ${((Date.now() - startedAt) / 1000).toFixed(0)} s: ${servers.map((s) => `${s.serverId} ${s.url}`).join(', ')}`
    );
    workers = startLocalWorkers(settings, {
      roles: ['orchestrator', 'env', 'trainer-vlm'],
      envWorkers: 1,
      envSlots: o.envs,
      envKind: 'browser',
      // Envs and inference share 2 cores here (DART runs them on separate machines): vLLM goes first.
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
    let throughput: ReturnType<typeof compareThroughput> | null = null;
    let loopBreakdown: LoopBreakdown | null = null;
    let feeding: LoopFeeding | null = null;
    let directByConcurrency: Array<{ concurrency: number; tokensPerSecond: number; seconds: number; ratio: number }> =
      [];
    let cores: Record<string, ReturnType<typeof coresIn>> | null = null;
    if (!o.skipThroughput) {
      const tputId = `${campaignId}-throughput`;
      const suite = loadSuite(SUITE);
      const input: EvaluateInput = {
        campaignId: tputId,
        version: result.policyVersion,
        tasks: suite.taskSpecs.map((t) => ({ ...t })),
        episodesPerTask: o.throughputEpisodes,
        sampledEpisodesPerTask: 0,
        endpoints: servers.map((s) => s.url),
        policyKind: 'uitars',
        policyOptions: { model: 'dartflow', ...(config.policy.options ?? {}) },
        atEpisodes: 0,
        startedAtMs: Date.now(),
        record: false,
      };
      const cpuGroups: CpuGroups = {
        vllmRoots: servers.flatMap((sv) => (sv.vllm ? [sv.vllm.pid] : [])),
        // Each worker role with what it started (the env worker's Chromium, the trainer's ranks).
        roots: Object.fromEntries(
          (workers?.children ?? []).flatMap((ch) => (ch.process.pid ? [[ch.name, ch.process.pid]] : []))
        ),
        single: { 'bench (vLLM fronts, direct client)': process.pid, ...serverPids() },
      };
      const vllmUrls = servers.map((sv) => sv.control.baseUrl);
      await Promise.all(vllmUrls.map(resetVllmCaches));
      const loopCache = await cacheCountersOf(vllmUrls);
      const loopCpu = cpuNow(cpuGroups);
      const loopQueues = sampleQueues(vllmUrls);
      const frontsBefore = servers.map((sv) => sv.front.stats());
      const loopStart = Date.now();
      await client.temporal.workflow.execute('evaluateWorkflow', {
        taskQueue: TASK_QUEUES.orchestrator,
        workflowId: tputId,
        args: [input],
      });
      const loopSeconds = (Date.now() - loopStart) / 1000;
      const loopOccupancy = loopQueues.stop().map((q) => batchOccupancy(q, o.seqs));
      const frontsAfter = servers.map((sv) => sv.front.stats());
      const loopCores = coresIn(loopCpu, cpuNow(cpuGroups), loopSeconds);
      const loopCacheRates = cacheHitRates(loopCache, await cacheCountersOf(vllmUrls));
      const { turns, breakdown: loop } = await recordedTurns(store, `${tputId}.eval`);
      loopBreakdown = loop;
      const dartflow: ThroughputWindow = {
        tokens: turns.reduce((a, t) => a + t.tokens, 0),
        requests: turns.length,
        seconds: loopSeconds,
        concurrency: o.seqs * servers.length,
        envSlots: o.envs,
        ...loopCacheRates,
      };
      // The same prompts straight to vLLM, twice: one client loop per vLLM batch slot (every server always
      // has exactly --seqs requests to batch), then as many loops as the episode loop had env slots (its
      // concurrency). The headline ratio is against the faster of the two.
      const driveDirect = async (lanesPerServer: number) => {
        await Promise.all(vllmUrls.map(resetVllmCaches));
        const cacheBefore = await cacheCountersOf(vllmUrls);
        const cpuBefore = cpuNow(cpuGroups);
        const queues = sampleQueues(vllmUrls);
        const startedAt = Date.now();
        const lanes = servers.flatMap((sv) =>
          Array.from(
            { length: lanesPerServer },
            () => (t: (typeof turns)[number]) =>
              directChat(sv.control.baseUrl, 'dartflow', t.messages, { maxTokens: o.maxTokens, logitBias })
          )
        );
        const tokens = await runLanes(turns, lanes);
        const seconds = (Date.now() - startedAt) / 1000;
        const occupancy = queues.stop().map((q) => batchOccupancy(q, o.seqs));
        const window: ThroughputWindow = {
          tokens: tokens.reduce((a, n) => a + n, 0),
          requests: tokens.length,
          seconds,
          concurrency: lanes.length,
          ...cacheHitRates(cacheBefore, await cacheCountersOf(vllmUrls)),
        };
        return { window, occupancy, cores: coresIn(cpuBefore, cpuNow(cpuGroups), seconds) };
      };
      const atBatchSlots = await driveDirect(o.seqs);
      const atEnvSlots = await driveDirect(Math.max(o.seqs, Math.ceil(o.envs / servers.length)));
      const comparisons = [atBatchSlots, atEnvSlots].map((d) => compareThroughput(dartflow, d.window));
      const best = comparisons[0]!.direct.tokensPerSecond >= comparisons[1]!.direct.tokensPerSecond ? 0 : 1;
      throughput = comparisons[best]!;
      directByConcurrency = comparisons.map((c) => ({
        concurrency: c.direct.concurrency,
        tokensPerSecond: Number(c.direct.tokensPerSecond.toFixed(1)),
        seconds: Number(c.direct.seconds.toFixed(1)),
        ratio: Number(c.ratio.toFixed(3)),
      }));
      const direct = throughput.direct;
      cores = {
        dartflowLoop: loopCores,
        direct: [atBatchSlots, atEnvSlots][best]!.cores,
        directAtBatchSlots: atBatchSlots.cores,
        directAtEnvSlots: atEnvSlots.cores,
      };
      log(`cores busy: ${JSON.stringify(cores)}`);
      log(
        `vLLM cache hit rates (caches emptied before each window): loop ${JSON.stringify(loopCacheRates)}, direct ${JSON.stringify([atBatchSlots, atEnvSlots].map((d) => ({ prefixHitRate: d.window.prefixHitRate, mmHitRate: d.window.mmHitRate })))}`
      );
      log(
        `direct drive by concurrency: ${directByConcurrency.map((d) => `${d.concurrency} clients ${d.tokensPerSecond} tokens/s (loop ${d.ratio.toFixed(2)}×)`).join(', ')}`
      );
      log(
        `rollout tokens/s: dartflow loop ${throughput.dartflow.tokensPerSecond.toFixed(1)} (${dartflow.tokens} tokens, ${dartflow.requests} requests, ${dartflow.seconds.toFixed(1)} s), direct ${direct.tokensPerSecond.toFixed(1)} (${direct.tokens} tokens, ${direct.seconds.toFixed(1)} s, ${direct.concurrency} clients, the faster drive): ${throughput.ratio.toFixed(2)}×`
      );
      log(`episode loop time (Σ over ${loop.episodes} episodes): ${JSON.stringify(loop)}`);
      // The fronts' answered requests and their time in the front and in vLLM over the loop window.
      const fronts: FrontStats = { answered: 0, frontMs: 0, upstreamMs: 0 };
      frontsAfter.forEach((f, i) => {
        fronts.answered += f.answered - frontsBefore[i]!.answered;
        fronts.frontMs += f.frontMs - frontsBefore[i]!.frontMs;
        fronts.upstreamMs += f.upstreamMs - frontsBefore[i]!.upstreamMs;
      });
      feeding = loopFeeding(turns, loop, fronts, {
        loopOccupancy,
        directOccupancy: atBatchSlots.occupancy,
        directAtEnvSlotsOccupancy: atEnvSlots.occupancy,
      });
      log(`how vLLM was fed: ${JSON.stringify(feeding)}`);
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
      throughput,
      directByConcurrency,
      loopBreakdown,
      feeding,
      cores,
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
      ...(throughput
        ? [
            { label: 'tokens/s ÷ 10, dartflow loop', value: throughput.dartflow.tokensPerSecond / 10 },
            { label: 'tokens/s ÷ 10, vLLM direct', value: throughput.direct.tokensPerSecond / 10 },
          ]
        : []),
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
