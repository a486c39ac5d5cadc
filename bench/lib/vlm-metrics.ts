/**
 * Pure summaries for the VLM benchmark (bench/vlm.ts, issue 13.4): rolling-reload latency per server
 * (from model-rollout histories), trainer step time (from the ledger), and rollout tokens/s through
 * dartflow's episode loop against the same vLLM servers driven directly. No I/O here.
 */

/** The events of one model-rollout history that matter here, in history order. */
export type RolloutEvent =
  | { kind: 'scheduled'; eventId: string; at: number; taskQueue: string; activity: string }
  | { kind: 'completed'; scheduledEventId: string; at: number; result: unknown };

export interface ReloadSample {
  serverId: string;
  version: number;
  /** What the server measured: fetch + check + drain + vLLM reload (ReloadPolicyResult.loadMs). */
  loadMs: number;
  /** Scheduled → completed in Temporal: loadMs plus the dispatch to the server's queue. */
  activityMs: number;
}

/**
 * Each completed `reloadPolicy` of a rollout history: the server (from its `policy-<serverId>` queue and the
 * result), the version, the server's own load time and the time Temporal saw. Reloads that were not
 * completed (refused, timed out) or had nothing to do (`unchanged`) are not latency samples.
 */
export function reloadSamples(events: readonly RolloutEvent[]): ReloadSample[] {
  const scheduled = new Map<string, { at: number; activity: string }>();
  const out: ReloadSample[] = [];
  for (const e of events) {
    if (e.kind === 'scheduled') scheduled.set(e.eventId, { at: e.at, activity: e.activity });
    else {
      const s = scheduled.get(e.scheduledEventId);
      if (!s || s.activity !== 'reloadPolicy') continue;
      const r = e.result as { serverId?: unknown; version?: unknown; loadMs?: unknown; unchanged?: unknown } | null;
      if (!r || typeof r.serverId !== 'string' || typeof r.version !== 'number' || typeof r.loadMs !== 'number')
        continue;
      // A server that already served the version (e.g. its start-up folder) did no reload.
      if (r.unchanged === true) continue;
      out.push({ serverId: r.serverId, version: r.version, loadMs: r.loadMs, activityMs: e.at - s.at });
    }
  }
  return out;
}

export interface Distribution {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  max: number;
}

/** Mean and nearest-rank percentiles; null for no samples. */
export function distribution(values: readonly number[]): Distribution | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
  return {
    n: sorted.length,
    mean: sorted.reduce((a, v) => a + v, 0) / sorted.length,
    p50: rank(0.5),
    p90: rank(0.9),
    max: sorted.at(-1)!,
  };
}

/** Reload latency per server (ms): the server's load time and the activity's end-to-end time. */
export function reloadLatencyByServer(
  samples: readonly ReloadSample[]
): Record<string, { loadMs: Distribution; activityMs: Distribution }> {
  const by = new Map<string, ReloadSample[]>();
  for (const s of samples) by.set(s.serverId, [...(by.get(s.serverId) ?? []), s]);
  return Object.fromEntries(
    [...by].map(([id, list]) => [
      id,
      {
        loadMs: distribution(list.map((s) => s.loadMs))!,
        activityMs: distribution(list.map((s) => s.activityMs))!,
      },
    ])
  );
}

/** A ledger entry as far as timing goes (schemas/records.ts LedgerEntrySchema). */
export interface LedgerTiming {
  trainStep: number;
  fromVersion: number;
  toVersion: number;
  consumed: number;
  metrics: Record<string, number>;
  startedAt?: number;
  createdAt: number;
}

export interface TrainerTiming {
  /** The behaviour-cloning warm start (the first step from v0), seconds of the trainer's computation. */
  bcSeconds: number | null;
  /** RL steps: the trainer's own stepSeconds (re-scoring π_old, update, save). */
  rlStepSeconds: Distribution | null;
  /** RL steps: claimed → committed as the ledger saw it (includes loading samples and uploading). */
  rlWallSeconds: Distribution | null;
  rlSteps: number;
  /** Trajectories per RL step (injected pool successes included). */
  rlTrajectoriesPerStep: Distribution | null;
}

/**
 * Trainer step time from the ledger. The warm start is the entry from v0 when the campaign cloned
 * demonstrations (its metrics have no `stepSeconds`; its wall time is reported instead).
 */
export function trainerTiming(entries: readonly LedgerTiming[], hadWarmStart: boolean): TrainerTiming {
  const sorted = [...entries].sort((a, b) => a.trainStep - b.trainStep);
  const bc = hadWarmStart ? sorted.find((e) => e.fromVersion === 0) : undefined;
  const rl = sorted.filter((e) => e !== bc);
  const wall = (e: LedgerTiming) => (e.startedAt !== undefined ? (e.createdAt - e.startedAt) / 1000 : undefined);
  const finite = (xs: Array<number | undefined>) =>
    xs.filter((x): x is number => x !== undefined && Number.isFinite(x));
  return {
    bcSeconds: bc ? (bc.metrics.stepSeconds ?? wall(bc) ?? null) : null,
    rlStepSeconds: distribution(finite(rl.map((e) => e.metrics.stepSeconds))),
    rlWallSeconds: distribution(finite(rl.map(wall))),
    rlSteps: rl.length,
    rlTrajectoriesPerStep: distribution(rl.map((e) => e.consumed)),
  };
}

export interface ThroughputWindow {
  /** Generated (completion) tokens in the window. */
  tokens: number;
  /** Chat requests answered in the window. */
  requests: number;
  seconds: number;
  /**
   * Requests vLLM batches at once over all servers (each server's `--max-num-seqs` × servers; the direct
   * drive keeps exactly that many in flight).
   */
  concurrency: number;
  /** Episodes in flight in the episode loop (env slots); more than `concurrency` keeps vLLM full while envs step. */
  envSlots?: number;
  /** vLLM's prefix (KV) cache hit rate in the window, by tokens; each window starts with emptied caches. */
  prefixHitRate?: number | null;
  /** vLLM's multimodal processor cache hit rate in the window. */
  mmHitRate?: number | null;
}

export interface ThroughputComparison {
  dartflow: ThroughputWindow & { tokensPerSecond: number };
  direct: ThroughputWindow & { tokensPerSecond: number };
  /** dartflow tokens/s ÷ direct tokens/s (issue 13 target ≥ 0.8). */
  ratio: number;
}

export function compareThroughput(dartflow: ThroughputWindow, direct: ThroughputWindow): ThroughputComparison {
  const rate = (w: ThroughputWindow) => (w.seconds > 0 ? w.tokens / w.seconds : 0);
  const d = rate(dartflow);
  const v = rate(direct);
  return {
    dartflow: { ...dartflow, tokensPerSecond: d },
    direct: { ...direct, tokensPerSecond: v },
    ratio: v > 0 ? d / v : 0,
  };
}

/**
 * Windows of one kind measured at different times, as one: tokens, requests and seconds summed (so the rate
 * is Σ tokens ÷ Σ seconds), cache hit rates averaged weighted by requests (a window's prompt-token counts
 * are not kept). With the windows run in mirrored order (loop, direct, direct, loop) a drift of the machine
 * over the set — warming caches, a neighbour's load — weighs on both kinds alike instead of favouring
 * whichever ran first. Throws on an empty list or on windows of different concurrency.
 */
export function poolWindows(windows: readonly ThroughputWindow[]): ThroughputWindow {
  const first = windows[0];
  if (!first) throw new Error('poolWindows: no windows to pool');
  if (windows.some((w) => w.concurrency !== first.concurrency || w.envSlots !== first.envSlots))
    throw new Error(
      `poolWindows: windows of different concurrency (${windows.map((w) => `${w.concurrency}/${w.envSlots ?? '-'}`).join(', ')})`
    );
  const requests = windows.reduce((a, w) => a + w.requests, 0);
  const weighted = (pick: (w: ThroughputWindow) => number | null | undefined): number | null => {
    const known = windows.filter((w) => typeof pick(w) === 'number' && w.requests > 0);
    const n = known.reduce((a, w) => a + w.requests, 0);
    return n > 0 ? Number((known.reduce((a, w) => a + pick(w)! * w.requests, 0) / n).toFixed(3)) : null;
  };
  return {
    tokens: windows.reduce((a, w) => a + w.tokens, 0),
    requests,
    seconds: windows.reduce((a, w) => a + w.seconds, 0),
    concurrency: first.concurrency,
    ...(first.envSlots !== undefined ? { envSlots: first.envSlots } : {}),
    prefixHitRate: weighted((w) => w.prefixHitRate),
    mmHitRate: weighted((w) => w.mmHitRate),
  };
}

/** What one turn of the episode loop costs outside vLLM, per request (null: no requests answered). */
export interface TurnCost {
  /** Env-slot seconds not spent waiting for vLLM's answer: Chromium, prompt, parse, Temporal, idle slots. */
  wall: number | null;
  /** CPU seconds of every process but vLLM's (env worker with Chromium, Temporal, MinIO, fronts, the kernel). */
  cpu: number | null;
}

/**
 * The loop's cost per turn outside vLLM. By Little's law a server answering R requests/s in T seconds each
 * stays fed with R × (T + wall) env slots, and the env side needs R × cpu cores: how the loop would keep a
 * faster (GPU) server fed, which a CPU machine cannot show directly. Upper bounds: slots idle in the loop's
 * ramp-up and drain count as wall, and the whole window's CPU outside vLLM (Temporal's and MinIO's idle
 * ticks, the kernel's) as cpu.
 */
export function turnCost(w: {
  envSlots: number;
  /** The loop's first step start → last step end. */
  busySeconds: number;
  /** Σ over answered requests of the time vLLM took (the fronts' upstream time). */
  vllmSeconds: number;
  /** Requests the fronts answered in the window. */
  answered: number;
  /** CPU seconds of every process but vLLM's over the window. */
  otherCpuSeconds: number;
  /** Turns the loop recorded in the window. */
  requests: number;
}): TurnCost {
  const per = (seconds: number, n: number) => (n > 0 ? Number((seconds / n).toFixed(3)) : null);
  return {
    wall: per(Math.max(0, w.envSlots * w.busySeconds - w.vllmSeconds), w.answered),
    cpu: per(w.otherCpuSeconds, w.requests),
  };
}

/** One answered request: when its answer arrived (ms) and how many tokens it generated. */
export interface TokenCompletion {
  at: number;
  tokens: number;
}

/**
 * Tokens/s in a window's steady state: the tokens answered after the moment `lo` of the window's tokens had
 * been answered, up to the moment `hi` had, over that time. Ramp-up (the first requests still on their way)
 * and drain (the last ones with the batch emptying) are left out alike on every side measured this way.
 * 0 when the window is too short to have such a span.
 */
export function steadyTokensPerSecond(completions: readonly TokenCompletion[], lo = 0.1, hi = 0.9): number {
  const sorted = [...completions].sort((a, b) => a.at - b.at);
  const total = sorted.reduce((a, c) => a + c.tokens, 0);
  let cumulative = 0;
  let from: { at: number; cumulative: number } | undefined;
  for (const c of sorted) {
    cumulative += c.tokens;
    if (!from && cumulative >= lo * total) from = { at: c.at, cumulative };
    else if (from && cumulative >= hi * total) {
      const seconds = (c.at - from.at) / 1000;
      return seconds > 0 ? (cumulative - from.cumulative) / seconds : 0;
    }
  }
  return 0;
}

/**
 * Runs `jobs` with at most `concurrency` at once, in order (the direct drive's client loops). Resolves
 * with each job's result in input order.
 */
export function runPool<T, R>(jobs: readonly T[], concurrency: number, run: (job: T) => Promise<R>): Promise<R[]> {
  return runLanes(
    jobs,
    Array.from({ length: Math.max(1, concurrency) }, () => run)
  );
}

/**
 * Runs `jobs` on `lanes`: each lane is one client loop that takes the next job from a shared queue as
 * soon as its previous one is answered (one lane per vLLM batch slot: a server with `--max-num-seqs 2`
 * gets two lanes, so every server stays full and none is sent more than it batches). Resolves with each
 * job's result in input order.
 */
export async function runLanes<T, R>(jobs: readonly T[], lanes: ReadonlyArray<(job: T) => Promise<R>>): Promise<R[]> {
  if (lanes.length === 0) throw new Error('runLanes needs at least one lane');
  const out: R[] = new Array<R>(jobs.length);
  let next = 0;
  const loop = async (run: (job: T) => Promise<R>) => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await run(jobs[i]!);
    }
  };
  await Promise.all(lanes.slice(0, Math.max(1, jobs.length)).map(loop));
  return out;
}

/** vLLM's cache counters (Prometheus text of its /metrics), summed over engines and labels. */
export interface VllmCacheCounters {
  prefixQueries: number;
  prefixHits: number;
  mmQueries: number;
  mmHits: number;
}

const CACHE_COUNTERS: Record<keyof VllmCacheCounters, string> = {
  prefixQueries: 'vllm:prefix_cache_queries_total',
  prefixHits: 'vllm:prefix_cache_hits_total',
  mmQueries: 'vllm:mm_cache_queries_total',
  mmHits: 'vllm:mm_cache_hits_total',
};

/**
 * Sums each named metric over every sample line (any labels) of one or more Prometheus texts; `seen` says
 * whether any of them was exported at all.
 */
function sumMetrics<K extends string>(
  texts: readonly string[],
  names: Record<K, string>
): { sums: Record<K, number>; seen: boolean } {
  const entries = Object.entries(names) as Array<[K, string]>;
  const sums = Object.fromEntries(entries.map(([k]) => [k, 0])) as Record<K, number>;
  let seen = false;
  for (const text of texts) {
    for (const line of text.split('\n')) {
      if (line.startsWith('#')) continue;
      for (const [key, name] of entries) {
        if (line.startsWith(name) && (line[name.length] === '{' || line[name.length] === ' ')) {
          const v = Number(line.slice(line.lastIndexOf(' ') + 1));
          if (Number.isFinite(v)) {
            sums[key] += v;
            seen = true;
          }
        }
      }
    }
  }
  return { sums, seen };
}

/** Sums each cache counter over every sample line (any labels) of one or more /metrics texts. */
export function vllmCacheCounters(texts: readonly string[]): VllmCacheCounters {
  return sumMetrics(texts, CACHE_COUNTERS).sums;
}

/** Hit rates in a window (null: no queries in it): the prefix (KV) cache and the multimodal processor cache. */
export function cacheHitRates(
  before: VllmCacheCounters,
  after: VllmCacheCounters
): { prefixHitRate: number | null; mmHitRate: number | null } {
  const rate = (hits: number, queries: number) => (queries > 0 ? Number((hits / queries).toFixed(3)) : null);
  return {
    prefixHitRate: rate(after.prefixHits - before.prefixHits, after.prefixQueries - before.prefixQueries),
    mmHitRate: rate(after.mmHits - before.mmHits, after.mmQueries - before.mmQueries),
  };
}

/** vLLM's scheduler gauges at one moment, one server: requests in the running batch and waiting in its queue. */
export interface VllmQueueSample {
  running: number;
  waiting: number;
}

const QUEUE_GAUGES: Record<keyof VllmQueueSample, string> = {
  running: 'vllm:num_requests_running',
  waiting: 'vllm:num_requests_waiting',
};

/** The running/waiting gauges of one /metrics text (summed over label sets); null when vLLM exports neither. */
export function vllmQueueGauges(text: string): VllmQueueSample | null {
  const { sums, seen } = sumMetrics([text], QUEUE_GAUGES);
  return seen ? sums : null;
}

/** How full one server's batch was over a window of samples (`batchSlots`: its --max-num-seqs). */
export interface BatchOccupancy {
  samples: number;
  meanRunning: number;
  meanWaiting: number;
  /** Share of samples with fewer requests running than batch slots (a batch slot unused). */
  underfilled: number;
  /** Share of samples with nothing running (the engine idle). */
  idle: number;
}

export function batchOccupancy(samples: readonly VllmQueueSample[], batchSlots: number): BatchOccupancy | null {
  if (samples.length === 0) return null;
  const mean = (f: (s: VllmQueueSample) => number) =>
    Number((samples.reduce((a, s) => a + f(s), 0) / samples.length).toFixed(3));
  return {
    samples: samples.length,
    meanRunning: mean((s) => s.running),
    meanWaiting: mean((s) => s.waiting),
    underfilled: mean((s) => (s.running < batchSlots ? 1 : 0)),
    idle: mean((s) => (s.running === 0 ? 1 : 0)),
  };
}
