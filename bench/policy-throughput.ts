/**
 * Policy-server throughput benchmark (not a test): actions/s and latency percentiles of POST /v1/act
 * for each way of sending observations, next to raw batched onnxruntime throughput of the same network
 * measured in the same run (the ratio says what HTTP, JSON, decoding and batching cost on top of the
 * bare forward pass).
 *
 * Observation forms (rollout/api.ts):
 *  - png:      one 160×160 PNG (base64) per call; the server decodes and downsamples it (the old path).
 *  - encoded:  one observation per call, already encoded by the sender ([3,64,64] float32 in the binary
 *              act body), as the env worker's EpisodePolicy sends it; the server only checks and packs it.
 *  - encoded×K: K encoded observations per call (PolicyServerClient.actMany's body; what an env worker's
 *              ActCoalescer sends when its episodes' steps wait together).
 * The server runs in a child process (as in deployment: its own event loop), the load generator here:
 * closed-loop callers, each with one call in flight. Observations are encoded and call bodies packed
 * once up front, so the load generator pays neither the env worker's PNG decoding nor per-call packing.
 *
 *   npx tsx bench/policy-throughput.ts [--seconds 3] [--warmup 1] [--max-batch 32]
 *                                      [--only encoded:32] [--server-prof DIR]
 * `--only mode:perCall` measures only the points of that form (e.g. `encoded:32`, the goal's point);
 * `--server-prof DIR` runs the server under the V8 profiler (`--cpu-prof`, profile written to DIR on exit).
 * Writes policy-throughput.json, .svg and .png to .data/bench, or with --publish to docs/bench
 * (bench/lib/output.ts); `--chart-only` redraws the chart from that JSON.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { loadInfraSettings } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../lib/charts';
import { actionMask } from '../policy/action-space';
import { encodeInstruction, encodeScreenshot } from '../policy/observation';
import { createInferenceSession, packBatch, type ObservationRow } from '../policy/session';
import { defaultPolicySpec, paramCount } from '../policy/spec';
import { initWeights } from '../policy/weights';
import { PolicyServerClient } from '../rollout/client';
import { HttpAgents, httpExchange } from '../rollout/http-exchange';
import { encodeScreenshotImage, packActCall, type OutgoingActRequest } from '../rollout/act-wire';
import { PolicyEngine } from '../rollout/engine';
import { startPolicyHttpServer } from '../rollout/policy-server';
import { ObjectStore } from '../storage/object-store';
import { makePng } from '../test/rollout/helpers';
import { benchOutDir, benchPublishing, shownPath } from './lib/output';

const TOKEN = 'bench-token-0123456789abcdef';
const spec = defaultPolicySpec;
const INSTRUCTION = 'click on the red box';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Child mode: serve one maxBatch setting until killed; print the URL as one JSON line. */
async function serve(): Promise<void> {
  const maxBatch = Number(arg('max-batch', '32'));
  const engine = new PolicyEngine({
    serverId: `bench-b${maxBatch}`,
    spec,
    store: ObjectStore.fromSettings(loadInfraSettings()),
    maxBatch,
    maxWaitMs: Number(arg('max-wait-ms', '2')),
  });
  await engine.loadWeights('bench', 0, initWeights(spec, 1));
  const s = await startPolicyHttpServer({ engine, token: TOKEN });
  console.log(JSON.stringify({ url: s.url }));
  process.once('SIGTERM', () => {
    void s
      .close()
      .then(() => engine.close())
      .then(() => process.exit(0));
  });
}

interface RawRow {
  batch: number;
  msPerBatch: number;
  samplesPerSec: number;
  /** Samples per second of this process's CPU time: comparable with the server's actionsPerServerCpuSec. */
  samplesPerCpuSec: number;
}

async function rawOrt(seconds: number, rows: ObservationRow[]): Promise<RawRow[]> {
  const session = await createInferenceSession(spec, initWeights(spec, 1));
  const out: RawRow[] = [];
  for (const B of [1, 8, 32, 64]) {
    const batch = packBatch(
      spec,
      Array.from({ length: B }, (_, i) => rows[i % rows.length]!)
    );
    for (let i = 0; i < 20; i++) await session.run(batch); // warm-up
    let n = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const until = t0 + seconds * 1000;
    while (performance.now() < until) {
      await session.run(batch);
      n++;
    }
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    out.push({
      batch: B,
      msPerBatch: round(ms / n, 3),
      samplesPerSec: Math.round((n * B * 1000) / ms),
      samplesPerCpuSec: Math.round((n * B * 1e6) / (cpu.user + cpu.system)),
    });
  }
  await session.release();
  return out;
}

async function startChild(maxBatch: number): Promise<{ child: ChildProcess; url: string }> {
  const prof = arg('server-prof', '');
  const args = [
    ...(prof ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(prof)] : []),
    '--import',
    'tsx',
    __filename,
    '--serve',
    '--max-batch',
    String(maxBatch),
  ];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    cwd: path.resolve(__dirname, '..'),
  });
  const rl = readline.createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
    rl.on('line', (line) => {
      try {
        const j = JSON.parse(line) as { url?: string };
        if (j.url) resolve(j.url);
      } catch {
        /* not our line */
      }
    });
  });
  return { child, url };
}

/** CPU seconds (user + system) a process has used, from /proc (Linux); undefined elsewhere. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

type Mode = 'png' | 'encoded';

/** One act call (rollout/http-exchange.ts, as the policy client sends it); checks one answer per request. */
async function postAct(
  agents: HttpAgents,
  url: string,
  body: { body: Uint8Array | string; contentType: string },
  expected: number
): Promise<void> {
  const res = await httpExchange(
    url,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': body.contentType },
      body: body.body,
      timeoutMs: 30_000,
    },
    agents
  );
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
  const n = (JSON.parse(res.text) as { answers?: unknown[] }).answers?.length;
  if (n !== expected) throw new Error(`${n} answers for ${expected} requests`);
}

interface Point {
  mode: Mode;
  /** Observations per HTTP call. */
  perCall: number;
  maxBatch: number;
  /** Calls in flight (closed-loop callers). */
  callers: number;
  /** Observations in flight = callers × perCall. */
  inFlight: number;
  actions: number;
  actionsPerSec: number;
  /** Latency of one call (all its observations answered). */
  p50ms: number;
  p95ms: number;
  p99ms: number;
  meanBatch: number;
  /** Server process CPU per second of wall time (1 = one core busy). */
  serverCores: number | null;
  /** Actions per second of server CPU: the server's throughput if it had a core to itself. */
  actionsPerServerCpuSec: number | null;
  errors: number;
}

async function loadTest(
  child: ChildProcess,
  url: string,
  cfg: { mode: Mode; perCall: number; maxBatch: number; callers: number },
  warmupS: number,
  seconds: number,
  observations: Array<OutgoingActRequest['observation']>
): Promise<Point> {
  // Only for the server's health counters at the window's edges.
  const client = new PolicyServerClient({ endpoints: [url], token: TOKEN, maxAttempts: 1, timeoutMs: 30_000 });
  const lat: number[] = [];
  let errors = 0;
  let actions = 0;
  // Steady state only: completions are counted in the window [t0, t1) after the warm-up, and the
  // server's CPU and batch counters are read at its edges (the callers keep going until t1 and beyond).
  let t0 = Infinity;
  let t1 = Infinity;
  const window = (async () => {
    await new Promise((r) => setTimeout(r, warmupS * 1000));
    const h0 = await client.health(url);
    const cpu0 = cpuSeconds(child.pid!);
    t0 = performance.now();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    t1 = performance.now();
    const cpu1 = cpuSeconds(child.pid!);
    const h1 = await client.health(url);
    return { h0, h1, cpu: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined };
  })();
  // Each caller cycles through a few bodies packed up front (distinct observations and seeds) and sends
  // them over a keep-alive node:http agent: the load generator shares the 2 cores with the server, so it
  // spends as little CPU per call as it can (no per-call packing, no fetch machinery).
  const agents = new HttpAgents();
  const target = `${url}/v1/act`;
  const bodiesPerCaller = 4;
  await Promise.all(
    Array.from({ length: cfg.callers }, async (_, k) => {
      const bodies = Array.from({ length: bodiesPerCaller }, (_, i) =>
        packActCall(
          Array.from({ length: cfg.perCall }, (_, j) => ({
            observation: observations[(k * 7 + i * cfg.perCall + j) % observations.length]!,
            seed: k * 1_000_003 + i * cfg.perCall + j,
            temperature: 1,
          }))
        )
      );
      for (let i = 0; performance.now() < t1; i++) {
        const t = performance.now();
        try {
          await postAct(agents, target, bodies[i % bodiesPerCaller]!, cfg.perCall);
        } catch {
          errors++;
          continue;
        }
        const done = performance.now();
        if (done >= t0 && done < t1) {
          lat.push(done - t);
          actions += cfg.perCall;
        }
      }
    })
  );
  agents.destroy();
  const { h0, h1, cpu: serverCpu } = await window;
  const wallS = (t1 - t0) / 1000;
  lat.sort((a, b) => a - b);
  return {
    ...cfg,
    inFlight: cfg.callers * cfg.perCall,
    actions,
    actionsPerSec: Math.round(actions / wallS),
    p50ms: round(percentile(lat, 0.5)),
    p95ms: round(percentile(lat, 0.95)),
    p99ms: round(percentile(lat, 0.99)),
    meanBatch: round((h1.items - h0.items) / Math.max(1, h1.batches - h0.batches)),
    serverCores: serverCpu !== undefined ? round(serverCpu / wallS) : null,
    actionsPerServerCpuSec: serverCpu ? Math.round(actions / serverCpu) : null,
    errors,
  };
}

const label = (p: Pick<Point, 'mode' | 'perCall'>) =>
  p.mode === 'png'
    ? 'png (decoded on the server)'
    : p.perCall === 1
      ? 'encoded, 1 per call'
      : `encoded, ${p.perCall} per call`;

/**
 * The chart: per mode, actions per second of server CPU (solid: the server's efficiency, comparable with
 * raw onnxruntime per CPU-second) and per wall-clock second (what this shared machine gave).
 */
async function writeChart(dir: string, points: Point[], raw: RawRow[], maxBatch: number): Promise<void> {
  const raw32 = raw.find((r) => r.batch === maxBatch) ?? raw[raw.length - 1]!;
  const names = [...new Set(points.map(label))];
  const series: Series[] = names.flatMap((name) => {
    const mine = points.filter((p) => label(p) === name);
    return [
      {
        name: `${name}: per server CPU-s`,
        points: mine.map((p) => [p.inFlight, p.actionsPerServerCpuSec ?? 0] as [number, number]),
      },
      { name: `${name}: wall clock`, points: mine.map((p) => [p.inFlight, p.actionsPerSec] as [number, number]) },
    ];
  });
  const yMax = Math.max(raw32.samplesPerCpuSec, ...points.map((p) => p.actionsPerServerCpuSec ?? 0)) * 1.1;
  const svg = lineChartSvg(series, {
    title: `Policy server throughput (maxBatch ${maxBatch}; raw ORT wall ${raw32.samplesPerSec}/s; shared cores, see docs)`,
    xLabel: 'observations in flight',
    yLabel: 'actions per second (of server CPU, or wall clock)',
    width: 1000,
    yMin: 0,
    yMax,
    hLines: [
      { y: raw32.samplesPerCpuSec, label: `raw ORT B=${maxBatch} per CPU-s` },
      { y: raw32.samplesPerCpuSec / 2, label: '0.5× raw per CPU-s' },
    ],
  });
  fs.writeFileSync(path.join(dir, 'policy-throughput.svg'), `${svg}\n`);
  try {
    await writeSvgAsPng(svg, path.join(dir, 'policy-throughput.png'), loadInfraSettings().chromiumPath);
  } catch (err) {
    console.warn(`[bench] no PNG chart (Chromium: ${(err as Error).message}); the SVG is written`);
  }
}

/** --chart-only: redraws the chart from the output directory's policy-throughput.json without measuring. */
async function chartOnly(): Promise<void> {
  const dir = benchOutDir();
  const j = JSON.parse(fs.readFileSync(path.join(dir, 'policy-throughput.json'), 'utf8')) as {
    points: Point[];
    raw: RawRow[];
    atMaxBatch: { maxBatch: number };
  };
  await writeChart(dir, j.points, j.raw, j.atMaxBatch.maxBatch);
  console.log(`[bench] redrew ${shownPath(path.join(dir, 'policy-throughput.svg'))} and .png`);
}

async function main(): Promise<void> {
  const loadStart = os.loadavg()[0]!;
  const seconds = Number(arg('seconds', '3'));
  const warmupS = Number(arg('warmup', '1'));
  const maxBatch = Number(arg('max-batch', '32'));
  const only = arg('only', '');
  const pngBufs = Array.from({ length: 32 }, (_, i) => makePng(i));
  const pngObservations = pngBufs.map((p) => ({
    pngBase64: p.toString('base64'),
    instruction: INSTRUCTION,
    fields: ['hello'],
  }));
  const encodedObservations = pngBufs.map((p) => ({
    encoded: encodeScreenshotImage(p, { width: 160, height: 160 }, spec.imageSize),
    instruction: INSTRUCTION,
    fields: ['hello'],
  }));

  // PNG decode + downsample alone: what the png form costs the server, and the encoded form the env worker.
  const tp = performance.now();
  for (let r = 0; r < 5; r++) for (const p of pngBufs) encodeScreenshot(p, spec);
  const encodeMs = (performance.now() - tp) / (5 * pngBufs.length);

  const rows: ObservationRow[] = pngBufs.map((p) => ({
    obs: encodeScreenshot(p, spec),
    text: encodeInstruction(INSTRUCTION, spec),
    mask: actionMask(spec, { numFields: 1 }),
  }));
  console.log(`[bench] raw onnxruntime forward, ${seconds}s per batch size…`);
  const raw = await rawOrt(seconds, rows);
  console.table(raw);

  const grid: Array<{ mode: Mode; perCall: number; callers: number }> = [
    ...[16, 64].map((callers) => ({ mode: 'png' as const, perCall: 1, callers })),
    ...[1, 4, 16, 64].map((callers) => ({ mode: 'encoded' as const, perCall: 1, callers })),
    ...[1, 2, 4].map((callers) => ({ mode: 'encoded' as const, perCall: maxBatch, callers })),
  ].filter((g) => only === '' || `${g.mode}:${g.perCall}` === only);
  if (grid.length === 0) throw new Error(`--only ${only}: no such point; use png:1, encoded:1 or encoded:${maxBatch}`);
  const points: Point[] = [];
  const { child, url } = await startChild(maxBatch);
  try {
    for (const g of grid) {
      const obs = g.mode === 'png' ? pngObservations : encodedObservations;
      const p = await loadTest(child, url, { ...g, maxBatch }, warmupS, seconds, obs);
      console.log(
        `[bench] ${label(p)}, ${p.callers} calls in flight: ${p.actionsPerSec} actions/s, p50 ${p.p50ms} ms, p99 ${p.p99ms} ms, mean batch ${p.meanBatch}, server ${p.serverCores} cores, ${p.actionsPerServerCpuSec} actions per server CPU-s`
      );
      points.push(p);
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }

  const raw32 = raw.find((r) => r.batch === maxBatch) ?? raw[raw.length - 1]!;
  const bestOf = (ps: Point[]) => ps.reduce((a, b) => (b.actionsPerSec > a.actionsPerSec ? b : a));
  const best = bestOf(points);
  const summarize = (p: Point) => ({
    ...p,
    ratioToRawAtMaxBatch: round(p.actionsPerSec / raw32.samplesPerSec, 3),
    serverCpuRatioToRaw: p.actionsPerServerCpuSec ? round(p.actionsPerServerCpuSec / raw32.samplesPerCpuSec, 3) : null,
  });
  // Absent (null) when --only left the form out.
  const bestSummary = (ps: Point[]) => (ps.length ? summarize(bestOf(ps)) : null);
  const result = {
    benchmark: 'policy-throughput',
    createdAt: new Date().toISOString(),
    command: `npx tsx bench/policy-throughput.ts --seconds ${seconds} --warmup ${warmupS} --max-batch ${maxBatch}${only ? ` --only ${only}` : ''}${benchPublishing() ? ' --publish' : ''}`,
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model.trim() ?? '',
      memGiB: round(os.totalmem() / 2 ** 30, 1),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      /** 1-minute load average before and after the run: other processes on the machine take CPU too. */
      loadAverage: { start: round(loadStart, 2), end: round(os.loadavg()[0]!, 2) },
    },
    method: [
      `Server: a child process (PolicyEngine + node:http, default 24k-param CNN with initial weights, 1 ORT intra-op thread, maxBatch ${maxBatch}, maxWaitMs 2, no preprocessing threads).`,
      'Load generator: this process over loopback HTTP (node:http keep-alive agent); closed-loop callers, each with one call in flight, cycling through 4 bodies packed up front (packActCall: distinct observations and seeds); each call carries 1 or K observations. Packing up front keeps the load generator off the CPU the server needs (they share the cores).',
      'Simulated: the observations are 32 synthetic 160×160 PNG screenshots (test/rollout/helpers makePng) with one instruction; for the encoded form they are encoded once up front, so the load generator does not pay the PNG decoding an env worker would (encodeMsPerScreenshot below).',
      `Steady state: ${warmupS} s warm-up per point excluded, then ${seconds} s measured; actions = observations of the calls completed in the window.`,
      `The machine has ${os.cpus().length} cores and the load generator competes with the server for them (JSON encoding, base64, HTTP client): serverCores is the server's CPU use per wall second, and actionsPerServerCpuSec the throughput per second of server CPU (what the server would do with a core to itself).`,
      'Raw = session.run on pre-packed batches in this process, before the server starts (no competition from the load generator, but from whatever else runs on the machine: see loadAverage); samplesPerCpuSec divides by the CPU time it used.',
      "ratioToRawAtMaxBatch = actions/s ÷ raw samples/s at B=maxBatch (wall clock); serverCpuRatioToRaw = actions per server CPU-second ÷ raw samples per CPU-second (the server's efficiency, independent of how much CPU other processes left it).",
    ].join(' '),
    policy: { spec: 'default', params: paramCount(spec) },
    encodeMsPerScreenshot: round(encodeMs, 3),
    raw,
    points,
    atMaxBatch: {
      maxBatch,
      rawSamplesPerSec: raw32.samplesPerSec,
      best: summarize(best),
      bestPng: bestSummary(points.filter((p) => p.mode === 'png')),
      bestEncodedOnePerCall: bestSummary(points.filter((p) => p.mode === 'encoded' && p.perCall === 1)),
    },
  };
  const dir = benchOutDir();
  fs.writeFileSync(path.join(dir, 'policy-throughput.json'), `${JSON.stringify(result, null, 2)}\n`);

  await writeChart(dir, points, raw, maxBatch);
  console.log(
    `[bench] best ${best.actionsPerSec} actions/s (${label(best)}, ${best.callers} calls in flight, mean batch ${best.meanBatch}); raw ORT at B=${maxBatch}: ${raw32.samplesPerSec}/s; ratio ${result.atMaxBatch.best.ratioToRawAtMaxBatch} (per server CPU-second: ${result.atMaxBatch.best.serverCpuRatioToRaw})`
  );
  console.log(`[bench] wrote ${shownPath(path.join(dir, 'policy-throughput.json'))}, .svg and .png`);
}

if (require.main === module) {
  (process.argv.includes('--serve') ? serve() : process.argv.includes('--chart-only') ? chartOnly() : main()).catch(
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    }
  );
}
