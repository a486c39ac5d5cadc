/**
 * Rollout tokens/s of the VLM bench (issue 13.4): dartflow's episode loop against the same vLLM servers
 * driven directly with the loop's very prompts. One call measures three windows, each with vLLM's caches
 * emptied first: the loop (an evaluation workflow: Temporal → env worker → Chromium → UI-TARS prompt →
 * vLLM front → vLLM) on the env worker's slots; then the recorded prompts straight to vLLM (each to the
 * server that answered it in the loop) with one client loop per vLLM batch slot, and with one per env slot
 * of the loop (its concurrency); with `mirroredWindows`, a second round in mirrored order (the two direct
 * drives, then the loop again), the rates pooled over both rounds. Greedy decoding makes
 * every window generate the same tokens. With a placement (bench/lib/cpu-cap.ts) vLLM's processes are held
 * to the same compute in all three windows, as on an inference machine of their own: a CPU quota, or CPUs of
 * their own with everything else of the bench on the other CPUs.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { LocalWorkers } from '../../cli/local-workers';
import type { DartflowClient } from '../../client/dartflow-client';
import { processTree } from '../../infra/vllm';
import type { FrontStats } from '../../rollout/vllm/front';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { TASK_QUEUES } from '../../schemas/task-queues';
import type { ObjectStore } from '../../storage/object-store';
import { loadSuite } from '../../tasks';
import { PromptRecordSchema } from '../../vlm/prompt-record';
import type { VllmPolicyServerHandle } from '../../workers/vllm-policy-server';
import type { EvaluateInput } from '../../workflows/evaluate';
import { createCpuCap, type CpuGroup } from './cpu-cap';
import { cpuSeconds, serverPids } from './proc-cpu';
import {
  batchOccupancy,
  cacheHitRates,
  compareThroughput,
  runLanes,
  steadyTokensPerSecond,
  vllmCacheCounters,
  vllmQueueGauges,
  type BatchOccupancy,
  type ThroughputComparison,
  type ThroughputWindow,
  type TokenCompletion,
  turnCost,
  type TurnCost,
  poolWindows,
  type VllmCacheCounters,
  type VllmQueueSample,
} from './vlm-metrics';

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
  /** What one turn costs the loop outside vLLM (wall and CPU seconds per request): see turnCost. */
  loopCostPerTurn: TurnCost;
}

function loopFeeding(
  turns: readonly RecordedTurn[],
  loop: LoopBreakdown,
  /** The fronts' stats over the loop window, summed over servers. */
  fronts: FrontStats,
  occupancy: Pick<LoopFeeding, 'loopOccupancy' | 'directOccupancy' | 'directAtEnvSlotsOccupancy'>,
  /** The loop window: its length, env slots, and the cores busy outside vLLM in it (whole window). */
  window: { seconds: number; envSlots: number; otherCores: number }
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
    loopCostPerTurn: turnCost({
      envSlots: window.envSlots,
      busySeconds: busy,
      vllmSeconds: fronts.upstreamMs / 1000,
      answered: fronts.answered,
      otherCpuSeconds: window.otherCores * window.seconds,
      requests: turns.length,
    }),
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

/** What the throughput phase needs from the bench: the running cluster and the campaign's settings. */
export interface ThroughputContext {
  client: DartflowClient;
  store: ObjectStore;
  servers: readonly VllmPolicyServerHandle[];
  workers: LocalWorkers;
  /** Task suite of the evaluation episodes. */
  suite: string;
  policyVersion: number;
  /** The campaign's policy.options (token budget, logit bias, pixel bounds). */
  policyOptions: Record<string, unknown> | undefined;
  throughputEpisodes: number;
  /** Env slots of the env worker, and vLLM batch slots per server. */
  envs: number;
  seqs: number;
  maxTokens: number;
  logitBias: Record<string, number>;
  log: (line: string) => void;
  /** Cores of memory-streaming co-load for a diagnostic fourth window (0/undefined: none). */
  coloadCores?: number;
  /**
   * A second round in mirrored order after the first (loop, direct ×2, then direct ×2, loop), the headline
   * pooled over both: a drift over the set (warming, a neighbour's load) weighs on the loop and the direct
   * drive alike instead of on whichever ran first. Twice the time.
   */
  mirroredWindows?: boolean;
}

export interface RolloutThroughput {
  /** The loop against the faster direct drive (whole windows). */
  throughput: ThroughputComparison;
  /** Tokens/s in the middle 80 % of each window's tokens (ramp-up and drain left out), and their ratio. */
  steady: { loop: number; direct: number; ratio: number };
  directByConcurrency: Array<{
    concurrency: number;
    tokensPerSecond: number;
    steadyTokensPerSecond: number;
    seconds: number;
    ratio: number;
  }>;
  /** Each round's windows on their own (one round, or two with ThroughputContext.mirroredWindows). */
  rounds: Array<{
    loop: { tokensPerSecond: number; steadyTokensPerSecond: number; seconds: number };
    direct: Array<{ concurrency: number; tokensPerSecond: number; steadyTokensPerSecond: number; seconds: number }>;
    /** This round's loop ÷ its faster direct drive. */
    ratio: number;
  }>;
  /** The first round's loop: where its time went. */
  loopBreakdown: LoopBreakdown;
  feeding: LoopFeeding;
  cores: Record<string, ReturnType<typeof coresIn>>;
  /** The CPU cap vLLM ran under in all three windows (cores), or null. */
  vllmCoresCap: number | null;
  /** Where vLLM and the rest ran in all three windows (VllmPlacement.label), or null: every process on every core. */
  placement: string | null;
  /** How many processes each placement group held at the end of the windows (rest: null when none). */
  placementProcesses: { vllm: number; rest: number | null } | null;
  /** The diagnostic direct drive with a co-load beside vLLM (ThroughputContext.coloadCores), or null. */
  directWithCoload: {
    tokensPerSecond: number;
    steadyTokensPerSecond: number;
    vllmCores: number;
    coloadCores: number;
  } | null;
}

/** Where vLLM's processes, and optionally everything else of the bench, run in every window of a measurement. */
export interface VllmPlacement {
  /** What it is, for the log and vlm.json: "vLLM held to 1.5 cores", "vLLM on CPU 1, the rest on CPU 0". */
  label: string;
  /** vLLM's processes (API servers, engines). */
  vllm: CpuGroup;
  /** The bench's own process tree (workers, Chromium, fronts, direct client), Temporal and MinIO, or none. */
  rest?: CpuGroup;
  /** vLLM's CPU quota in cores, when `vllm` is one. */
  vllmCores?: number;
}

/**
 * Measures the three windows; `tputId` names the evaluation workflow (and its trajectories). With a
 * placement, every vLLM process is moved into its group before the first window (everything else of the
 * bench into `rest`) and out after the last.
 */
export async function measureRolloutThroughput(
  ctx: ThroughputContext,
  tputId: string,
  placement: VllmPlacement | null = null
): Promise<RolloutThroughput> {
  const vllmPids = ctx.servers.flatMap((sv) => (sv.vllm ? processTree(sv.vllm.pid) : []));
  try {
    if (placement) {
      placement.vllm.add(vllmPids);
      placement.rest?.add(benchPidsBut(vllmPids));
      // The rest's process list is read after vLLM's: a vLLM process it caught would run on the wrong CPUs.
      const held = new Set(placement.vllm.members());
      const strays = vllmPids.filter((pid) => !held.has(pid) && fs.existsSync(`/proc/${pid}`));
      if (strays.length > 0)
        throw new Error(`${placement.label}: vLLM processes ${strays.join(', ')} are not in ${placement.vllm.path}`);
    }
    return await measureWindows(ctx, tputId, placement);
  } finally {
    placement?.rest?.release();
    placement?.vllm.release();
  }
}

/** The bench's process tree, Temporal's and MinIO's, without `exclude` (vLLM's processes). */
function benchPidsBut(exclude: readonly number[]): number[] {
  const servers = Object.values(serverPids()).flatMap((pid) => (pid === undefined ? [] : processTree(pid)));
  const skip = new Set(exclude);
  return [...new Set([...processTree(process.pid), ...servers])].filter((pid) => !skip.has(pid));
}

/**
 * Two processes (one per core) that stream through 64 MiB each, a cache line at a time, held together to
 * `cores` by a cgroup: CPU time, cache and memory bandwidth taken beside vLLM the way Chromium and the
 * loop's servers take them. The cap needs the same cgroup support as the vLLM cap.
 */
function startCoload(cores: number): { stop(): Promise<void> } {
  const cap = createCpuCap(`dartflow-bench-coload-${process.pid}`, cores);
  const script =
    'const a = new Float64Array(8 << 20); let s = 0; for (;;) for (let i = 0; i < a.length; i += 8) s += a[i]++;';
  const children = [0, 1].map(() => spawn(process.execPath, ['-e', script], { stdio: 'ignore' }));
  // Busy loops must not outlive the bench, however it ends.
  const killAll = () => children.forEach((c) => c.kill('SIGKILL'));
  process.once('exit', killAll);
  try {
    cap.add(children.flatMap((c) => (c.pid ? [c.pid] : [])));
  } catch (err) {
    killAll();
    cap.release();
    throw err;
  }
  return {
    // The group can be removed only once its processes are gone (reaped), not as soon as they are signalled.
    async stop() {
      await Promise.all(
        children.map((c) =>
          c.exitCode !== null || c.signalCode !== null
            ? undefined
            : new Promise<void>((resolve) => {
                c.once('exit', () => resolve());
                c.kill('SIGKILL');
              })
        )
      );
      process.off('exit', killAll);
      cap.release();
    },
  };
}

/** One direct drive: its window, how full vLLM's batches were, its steady-state rate and the cores busy. */
interface DirectDrive {
  window: ThroughputWindow;
  occupancy: Array<BatchOccupancy | null>;
  steady: number;
  cores: ReturnType<typeof coresIn>;
}

/** One episode-loop window: an evaluation workflow run to its end, and what it sent vLLM. */
interface LoopRun {
  window: ThroughputWindow;
  turns: RecordedTurn[];
  breakdown: LoopBreakdown;
  occupancy: Array<BatchOccupancy | null>;
  steady: number;
  cores: ReturnType<typeof coresIn>;
  /** The fronts' answered requests and their time in the front and in vLLM over the window, summed over servers. */
  fronts: FrontStats;
}

async function runLoop(
  ctx: ThroughputContext,
  workflowId: string,
  input: EvaluateInput,
  cpuGroups: CpuGroups,
  vllmUrls: string[]
): Promise<LoopRun> {
  await Promise.all(vllmUrls.map(resetVllmCaches));
  const cacheBefore = await cacheCountersOf(vllmUrls);
  const cpuBefore = cpuNow(cpuGroups);
  const queues = sampleQueues(vllmUrls);
  const frontsBefore = ctx.servers.map((sv) => sv.front.stats());
  const startedAt = Date.now();
  await ctx.client.temporal.workflow.execute('evaluateWorkflow', {
    taskQueue: TASK_QUEUES.orchestrator,
    workflowId,
    args: [{ ...input, startedAtMs: startedAt }],
  });
  const seconds = (Date.now() - startedAt) / 1000;
  const occupancy = queues.stop().map((q) => batchOccupancy(q, ctx.seqs));
  const frontsAfter = ctx.servers.map((sv) => sv.front.stats());
  const cores = coresIn(cpuBefore, cpuNow(cpuGroups), seconds);
  const cacheRates = cacheHitRates(cacheBefore, await cacheCountersOf(vllmUrls));
  const { turns, breakdown } = await recordedTurns(ctx.store, `${input.campaignId}.eval`);
  const fronts: FrontStats = { answered: 0, frontMs: 0, upstreamMs: 0 };
  frontsAfter.forEach((f, i) => {
    fronts.answered += f.answered - frontsBefore[i]!.answered;
    fronts.frontMs += f.frontMs - frontsBefore[i]!.frontMs;
    fronts.upstreamMs += f.upstreamMs - frontsBefore[i]!.upstreamMs;
  });
  return {
    window: {
      tokens: turns.reduce((a, t) => a + t.tokens, 0),
      requests: turns.length,
      seconds,
      concurrency: ctx.seqs * ctx.servers.length,
      envSlots: ctx.envs,
      ...cacheRates,
    },
    turns,
    breakdown,
    occupancy,
    // The loop's answers by when their step ended (it drains by whole episodes, the direct drive by requests).
    steady: steadyTokensPerSecond(turns.map((t) => ({ at: t.endedAt, tokens: t.tokens }))),
    cores,
    fronts,
  };
}

async function measureWindows(
  ctx: ThroughputContext,
  tputId: string,
  placement: VllmPlacement | null
): Promise<RolloutThroughput> {
  const suite = loadSuite(ctx.suite);
  const input: EvaluateInput = {
    campaignId: tputId,
    version: ctx.policyVersion,
    tasks: suite.taskSpecs.map((t) => ({ ...t })),
    episodesPerTask: ctx.throughputEpisodes,
    sampledEpisodesPerTask: 0,
    endpoints: ctx.servers.map((s) => s.url),
    policyKind: 'uitars',
    policyOptions: { model: 'dartflow', ...(ctx.policyOptions ?? {}) },
    atEpisodes: 0,
    startedAtMs: Date.now(),
    record: false,
  };
  const cpuGroups: CpuGroups = {
    vllmRoots: ctx.servers.flatMap((sv) => (sv.vllm ? [sv.vllm.pid] : [])),
    // Each worker role with what it started (the env worker's Chromium, the trainer's ranks).
    roots: Object.fromEntries(
      (ctx.workers.children ?? []).flatMap((ch) => (ch.process.pid ? [[ch.name, ch.process.pid]] : []))
    ),
    single: { 'bench (vLLM fronts, direct client)': process.pid, ...serverPids() },
  };
  const vllmUrls = ctx.servers.map((sv) => sv.control.baseUrl);
  const first = await runLoop(ctx, tputId, input, cpuGroups, vllmUrls);
  const { turns, breakdown: loop } = first;
  // The server that answered each turn in the loop (a turn with none recorded: round-robin).
  const trim = (u: string | undefined) => u?.replace(/\/+$/, '');
  const turnsByServer = ctx.servers.map((): RecordedTurn[] => []);
  let unplaced = 0;
  turns.forEach((t, i) => {
    const k = ctx.servers.findIndex((sv) => trim(sv.url) === trim(t.server));
    if (k < 0) unplaced++;
    turnsByServer[k >= 0 ? k : i % ctx.servers.length]!.push(t);
  });
  ctx.log(
    `direct drive: turns per server as the loop sent them ${turnsByServer.map((ts) => ts.length).join(' / ')}${unplaced ? ` (${unplaced} with no recorded server, round-robin)` : ''}`
  );
  // The same prompts straight to vLLM, twice: one client loop per vLLM batch slot (every server always
  // has exactly --seqs requests to batch), then as many loops as the episode loop had env slots (its
  // concurrency). The headline ratio is against the faster of the two.
  const driveDirect = async (lanesPerServer: number): Promise<DirectDrive> => {
    await Promise.all(vllmUrls.map(resetVllmCaches));
    const cacheBefore = await cacheCountersOf(vllmUrls);
    const cpuBefore = cpuNow(cpuGroups);
    const queues = sampleQueues(vllmUrls);
    const startedAt = Date.now();
    const completions: TokenCompletion[] = [];
    // Each server gets the turns it answered in the loop, in the loop's order: their prefixes and images are
    // cached where the loop had them cached (sent anywhere, the replay would lose the loop's per-episode
    // locality and do more prefill and image work per token than the loop did).
    const perServer = await Promise.all(
      turnsByServer.map((own, k) =>
        runLanes(
          own,
          Array.from({ length: lanesPerServer }, () => async (t: RecordedTurn) => {
            const n = await directChat(ctx.servers[k]!.control.baseUrl, 'dartflow', t.messages, {
              maxTokens: ctx.maxTokens,
              logitBias: ctx.logitBias,
            });
            completions.push({ at: Date.now(), tokens: n });
            return n;
          })
        )
      )
    );
    const tokens = perServer.flat();
    const seconds = (Date.now() - startedAt) / 1000;
    const occupancy = queues.stop().map((q) => batchOccupancy(q, ctx.seqs));
    const window: ThroughputWindow = {
      tokens: tokens.reduce((a, n) => a + n, 0),
      requests: tokens.length,
      seconds,
      concurrency: lanesPerServer * ctx.servers.length,
      ...cacheHitRates(cacheBefore, await cacheCountersOf(vllmUrls)),
    };
    return {
      window,
      occupancy,
      steady: steadyTokensPerSecond(completions),
      cores: coresIn(cpuBefore, cpuNow(cpuGroups), seconds),
    };
  };
  // One client per env slot of the loop, spread over the servers (at least one per batch slot).
  const lanesAtEnvSlots = Math.max(ctx.seqs, Math.ceil(ctx.envs / ctx.servers.length));
  const atBatchSlotsRuns = [await driveDirect(ctx.seqs)];
  const atEnvSlotsRuns = [await driveDirect(lanesAtEnvSlots)];
  const loops = [first];
  if (ctx.mirroredWindows) {
    // The second round in mirrored order (direct at env slots, at batch slots, then the loop): with the
    // first round that is L D D D D L, so a drift of the machine over the set weighs on both kinds alike.
    atEnvSlotsRuns.push(await driveDirect(lanesAtEnvSlots));
    atBatchSlotsRuns.push(await driveDirect(ctx.seqs));
    loops.push(
      await runLoop(ctx, `${tputId}-mirror`, { ...input, campaignId: `${tputId}-mirror` }, cpuGroups, vllmUrls)
    );
  }
  const dartflow = poolWindows(loops.map((l) => l.window));
  // Diagnostics (cores, occupancy, cache rates, feeding) describe the first round; rates are pooled.
  const [atBatchSlots, atEnvSlots] = [atBatchSlotsRuns[0]!, atEnvSlotsRuns[0]!];
  const driveRuns = [atBatchSlotsRuns, atEnvSlotsRuns];
  const drives = [atBatchSlots, atEnvSlots];
  const comparisons = driveRuns.map((runs) => compareThroughput(dartflow, poolWindows(runs.map((d) => d.window))));
  const best = comparisons[0]!.direct.tokensPerSecond >= comparisons[1]!.direct.tokensPerSecond ? 0 : 1;
  const throughput = comparisons[best]!;
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const rate = (w: ThroughputWindow) => (w.seconds > 0 ? Number((w.tokens / w.seconds).toFixed(1)) : 0);
  const rounds = loops.map((l, r) => {
    const direct = driveRuns.map((runs) => ({
      concurrency: runs[r]!.window.concurrency,
      tokensPerSecond: rate(runs[r]!.window),
      steadyTokensPerSecond: Number(runs[r]!.steady.toFixed(1)),
      seconds: Number(runs[r]!.window.seconds.toFixed(1)),
    }));
    const faster = Math.max(...direct.map((d) => d.tokensPerSecond));
    return {
      loop: {
        tokensPerSecond: rate(l.window),
        steadyTokensPerSecond: Number(l.steady.toFixed(1)),
        seconds: Number(l.window.seconds.toFixed(1)),
      },
      direct,
      ratio: faster > 0 ? Number((rate(l.window) / faster).toFixed(3)) : 0,
    };
  });
  if (rounds.length > 1) ctx.log(`rounds (loop ÷ faster direct): ${rounds.map((r) => `${r.ratio}×`).join(', ')}`);
  // Diagnostic: the direct drive at the loop's concurrency once more with a stand-in for the env side beside
  // vLLM (memory-streaming processes held to ctx.coloadCores): how much vLLM slows from sharing the machine
  // alone, with nothing of dartflow's loop in the way. Not part of the headline ratio.
  let directWithCoload: RolloutThroughput['directWithCoload'] = null;
  if (ctx.coloadCores && ctx.coloadCores > 0) {
    const coload = startCoload(ctx.coloadCores);
    try {
      const d = await driveDirect(lanesAtEnvSlots);
      directWithCoload = {
        tokensPerSecond: Number((d.window.tokens / d.window.seconds).toFixed(1)),
        steadyTokensPerSecond: Number(d.steady.toFixed(1)),
        vllmCores: d.cores.vllmCores,
        coloadCores: ctx.coloadCores,
      };
      ctx.log(
        `direct drive with ${ctx.coloadCores} cores of memory-streaming co-load beside vLLM: ${JSON.stringify(directWithCoload)}`
      );
    } finally {
      await coload.stop();
    }
  }
  const directByConcurrency = comparisons.map((c, i) => ({
    concurrency: c.direct.concurrency,
    tokensPerSecond: Number(c.direct.tokensPerSecond.toFixed(1)),
    steadyTokensPerSecond: Number(mean(driveRuns[i]!.map((d) => d.steady)).toFixed(1)),
    seconds: Number(c.direct.seconds.toFixed(1)),
    ratio: Number(c.ratio.toFixed(3)),
  }));
  const direct = throughput.direct;
  // Steady state: the middle 80 % of each window's tokens (ramp-up and drain left out alike), averaged
  // over the rounds, the loop against the faster direct drive.
  const loopSteady = mean(loops.map((l) => l.steady));
  const directSteady = Math.max(...driveRuns.map((runs) => mean(runs.map((d) => d.steady))));
  const steady = {
    loop: Number(loopSteady.toFixed(1)),
    direct: Number(directSteady.toFixed(1)),
    ratio: directSteady > 0 ? Number((loopSteady / directSteady).toFixed(3)) : 0,
  };
  const cores = {
    dartflowLoop: first.cores,
    direct: drives[best]!.cores,
    directAtBatchSlots: atBatchSlots.cores,
    directAtEnvSlots: atEnvSlots.cores,
  };
  ctx.log(`cores busy: ${JSON.stringify(cores)}`);
  ctx.log(
    `vLLM cache hit rates (caches emptied before each window): loop ${JSON.stringify({ prefixHitRate: first.window.prefixHitRate, mmHitRate: first.window.mmHitRate })}, direct ${JSON.stringify(drives.map((d) => ({ prefixHitRate: d.window.prefixHitRate, mmHitRate: d.window.mmHitRate })))}`
  );
  ctx.log(
    `direct drive by concurrency: ${directByConcurrency.map((d) => `${d.concurrency} clients ${d.tokensPerSecond} tokens/s (loop ${d.ratio.toFixed(2)}×)`).join(', ')}`
  );
  ctx.log(
    `rollout tokens/s: dartflow loop ${throughput.dartflow.tokensPerSecond.toFixed(1)} (${dartflow.tokens} tokens, ${dartflow.requests} requests, ${dartflow.seconds.toFixed(1)} s), direct ${direct.tokensPerSecond.toFixed(1)} (${direct.tokens} tokens, ${direct.seconds.toFixed(1)} s, ${direct.concurrency} clients, the faster drive): ${throughput.ratio.toFixed(2)}×`
  );
  ctx.log(
    `steady state (middle 80 % of each window's tokens): loop ${steady.loop}, direct ${steady.direct} tokens/s: ${steady.ratio.toFixed(2)}×${placement ? ` (${placement.label} in every window)` : ''}`
  );
  ctx.log(`episode loop time (Σ over ${loop.episodes} episodes): ${JSON.stringify(loop)}`);
  const feeding = loopFeeding(
    turns,
    loop,
    first.fronts,
    {
      loopOccupancy: first.occupancy,
      directOccupancy: atBatchSlots.occupancy,
      directAtEnvSlotsOccupancy: atEnvSlots.occupancy,
    },
    { seconds: first.window.seconds, envSlots: ctx.envs, otherCores: first.cores.otherCores }
  );
  ctx.log(`how vLLM was fed: ${JSON.stringify(feeding)}`);
  return {
    throughput,
    steady,
    directByConcurrency,
    rounds,
    directWithCoload,
    loopBreakdown: loop,
    feeding,
    cores,
    vllmCoresCap: placement?.vllmCores ?? null,
    placement: placement?.label ?? null,
    placementProcesses: placement
      ? { vllm: placement.vllm.members().length, rest: placement.rest?.members().length ?? null }
      : null,
  };
}
