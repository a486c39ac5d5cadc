/**
 * Policy-server throughput benchmark (not a test): actions/s and latency percentiles of POST /v1/act
 * against client concurrency and the server's maxBatch, next to raw batched onnxruntime throughput of
 * the same network measured in the same run (the ratio says what HTTP, JSON, PNG decoding and
 * batching cost on top of the bare forward pass).
 *
 * The server runs in a child process (as in deployment: its own event loop and core), the load
 * generator here; each client loop sends one request at a time, like an env worker stepping an episode.
 *
 *   npx tsx bench/policy-throughput.ts [--seconds 3] [--concurrency 1,4,16,64] [--max-batch 1,8,32]
 * Writes docs/bench/policy-throughput.json and docs/bench/policy-throughput.svg.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { loadInfraSettings } from '../infra/settings';
import { encodeScreenshot } from '../policy/observation';
import { actionMask } from '../policy/action-space';
import { createInferenceSession, packBatch, type ObservationRow } from '../policy/session';
import { defaultPolicySpec, paramCount } from '../policy/spec';
import { initWeights } from '../policy/weights';
import { encodeInstruction } from '../policy/observation';
import { PolicyServerClient } from '../rollout/client';
import { PolicyEngine } from '../rollout/engine';
import { startPolicyHttpServer } from '../rollout/policy-server';
import { ObjectStore } from '../storage/object-store';
import { makePng } from '../test/rollout/helpers';

const TOKEN = 'bench-token-0123456789abcdef';
const spec = defaultPolicySpec;

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}
const list = (s: string) => s.split(',').map(Number);
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
    preprocessThreads: Number(arg('preprocess-threads', '0')),
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
    const t0 = performance.now();
    const until = t0 + seconds * 1000;
    while (performance.now() < until) {
      await session.run(batch);
      n++;
    }
    const ms = performance.now() - t0;
    out.push({ batch: B, msPerBatch: round(ms / n, 3), samplesPerSec: Math.round((n * B * 1000) / ms) });
  }
  await session.release();
  return out;
}

async function startChild(maxBatch: number, preprocessThreads: number): Promise<{ child: ChildProcess; url: string }> {
  const args = [
    '--import',
    'tsx',
    __filename,
    '--serve',
    '--max-batch',
    String(maxBatch),
    '--preprocess-threads',
    String(preprocessThreads),
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

interface ServerRow {
  maxBatch: number;
  preprocessThreads: number;
  concurrency: number;
  requests: number;
  actionsPerSec: number;
  p50ms: number;
  p95ms: number;
  p99ms: number;
  meanBatch: number;
  errors: number;
}

async function loadTest(
  url: string,
  maxBatch: number,
  preprocessThreads: number,
  concurrency: number,
  seconds: number,
  pngs: string[]
): Promise<ServerRow> {
  const client = new PolicyServerClient({ endpoints: [url], token: TOKEN, maxAttempts: 1, timeoutMs: 30_000 });
  const h0 = await client.health(url);
  const lat: number[] = [];
  let errors = 0;
  const warmupEnd = performance.now() + 300;
  const until = warmupEnd + seconds * 1000;
  let counted = 0;
  let tStart = 0;
  let tEnd = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, k) => {
      for (let i = 0; performance.now() < until; i++) {
        const t = performance.now();
        try {
          await client.act({
            observation: {
              pngBase64: pngs[(k * 7 + i) % pngs.length]!,
              instruction: 'click on the red box',
              fields: ['hello'],
            },
            seed: i,
            temperature: 1,
          });
        } catch {
          errors++;
          continue;
        }
        const done = performance.now();
        if (t >= warmupEnd) {
          if (tStart === 0) tStart = t;
          lat.push(done - t);
          counted++;
          tEnd = Math.max(tEnd, done);
        }
      }
    })
  );
  const h1 = await client.health(url);
  lat.sort((a, b) => a - b);
  return {
    maxBatch,
    preprocessThreads,
    concurrency,
    requests: counted,
    actionsPerSec: Math.round((counted * 1000) / (tEnd - tStart)),
    p50ms: round(percentile(lat, 0.5)),
    p95ms: round(percentile(lat, 0.95)),
    p99ms: round(percentile(lat, 0.99)),
    meanBatch: round((h1.items - h0.items) / Math.max(1, h1.batches - h0.batches)),
    errors,
  };
}

/** A small log-x line chart: actions/s vs concurrency, one line per maxBatch, raw ORT as dashed ceilings. */
function svgChart(rows: ServerRow[], raw: RawRow[]): string {
  const W = 640;
  const H = 380;
  const m = { l: 70, r: 170, t: 40, b: 50 };
  const concs = [...new Set(rows.map((r) => r.concurrency))].sort((a, b) => a - b);
  const yMax = Math.max(...rows.map((r) => r.actionsPerSec)) * 1.15;
  const x = (c: number) =>
    m.l +
    ((Math.log2(c) - Math.log2(concs[0]!)) / Math.max(1, Math.log2(concs[concs.length - 1]!) - Math.log2(concs[0]!))) *
      (W - m.l - m.r);
  const y = (v: number) => H - m.b - (Math.min(v, yMax) / yMax) * (H - m.t - m.b);
  const colors = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${m.l}" y="22" font-size="14">Policy server throughput (HTTP act, default 23k-param CNN)</text>`,
    `<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="black"/>`,
    `<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${H - m.b}" stroke="black"/>`,
    `<text x="${(m.l + W - m.r) / 2}" y="${H - 12}" text-anchor="middle">client concurrency (requests in flight)</text>`,
    `<text x="16" y="${(m.t + H - m.b) / 2}" transform="rotate(-90 16 ${(m.t + H - m.b) / 2})" text-anchor="middle">actions/s</text>`,
  ];
  for (const c of concs) parts.push(`<text x="${x(c)}" y="${H - m.b + 16}" text-anchor="middle">${c}</text>`);
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    parts.push(
      `<text x="${m.l - 6}" y="${y(v) + 4}" text-anchor="end">${Math.round(v)}</text>`,
      `<line x1="${m.l}" y1="${y(v)}" x2="${W - m.r}" y2="${y(v)}" stroke="#eee"/>`
    );
  }
  const batches = [...new Set(rows.map((r) => r.maxBatch))].sort((a, b) => a - b);
  batches.forEach((b, i) => {
    const pts = rows.filter((r) => r.maxBatch === b).sort((p, q) => p.concurrency - q.concurrency);
    const color = colors[i % colors.length]!;
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${x(p.concurrency)},${y(p.actionsPerSec)}`).join(' ')}"/>`
    );
    for (const p of pts)
      parts.push(`<circle cx="${x(p.concurrency)}" cy="${y(p.actionsPerSec)}" r="3" fill="${color}"/>`);
    parts.push(`<text x="${W - m.r + 10}" y="${m.t + 16 * i + 4}" fill="${color}">maxBatch ${b}</text>`);
  });
  const rawNote = raw.map((r) => `B=${r.batch}: ${r.samplesPerSec}/s`);
  parts.push(`<text x="${W - m.r + 10}" y="${m.t + 16 * batches.length + 20}">raw ORT forward:</text>`);
  rawNote.forEach((t, i) =>
    parts.push(`<text x="${W - m.r + 10}" y="${m.t + 16 * batches.length + 36 + 14 * i}" fill="#555">${t}</text>`)
  );
  parts.push('</svg>');
  return parts.join('\n');
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds', '3'));
  const concurrency = list(arg('concurrency', '1,4,16,64'));
  const maxBatches = list(arg('max-batch', '1,8,32'));
  const pngBufs = Array.from({ length: 32 }, (_, i) => makePng(i));
  const pngs = pngBufs.map((p) => p.toString('base64'));

  // Server-side per-request preprocessing, measured alone (it runs on the server's main thread too).
  const t0 = performance.now();
  for (let r = 0; r < 5; r++) for (const p of pngBufs) encodeScreenshot(p, spec);
  const preprocessMs = (performance.now() - t0) / (5 * pngBufs.length);

  const rows: ObservationRow[] = pngBufs.map((p) => ({
    obs: encodeScreenshot(p, spec),
    text: encodeInstruction('click on the red box', spec),
    mask: actionMask(spec, { numFields: 1 }),
  }));
  console.log(`[bench] raw onnxruntime forward, ${seconds}s per batch size…`);
  const raw = await rawOrt(seconds, rows);
  console.table(raw);

  const measureGrid = async (mb: number, pt: number, out: ServerRow[]) => {
    const { child, url } = await startChild(mb, pt);
    try {
      for (const c of concurrency) {
        const row = await loadTest(url, mb, pt, c, seconds, pngs);
        console.log(
          `[bench] maxBatch ${mb} preprocessThreads ${pt} concurrency ${c}: ${row.actionsPerSec} actions/s, p50 ${row.p50ms} ms, p99 ${row.p99ms} ms, mean batch ${row.meanBatch}`
        );
        out.push(row);
      }
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  };
  const server: ServerRow[] = [];
  for (const mb of maxBatches) await measureGrid(mb, 0, server);
  // The same server with screenshot decoding on worker threads (the main-thread cost found above).
  const threaded: ServerRow[] = [];
  const pt = Number(arg('preprocess-threads', '2'));
  if (pt > 0) await measureGrid(Math.max(...maxBatches), pt, threaded);
  const best = server.reduce((a, b) => (b.actionsPerSec > a.actionsPerSec ? b : a));
  const rawAt = (b: number) =>
    raw.reduce((a, r) => (Math.abs(r.batch - b) < Math.abs(a.batch - b) ? r : a)).samplesPerSec;
  const ratio = best.actionsPerSec / rawAt(best.meanBatch);
  const result = {
    benchmark: 'policy-throughput',
    createdAt: new Date().toISOString(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model.trim() ?? '',
      memGiB: round(os.totalmem() / 2 ** 30, 1),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
    method:
      'server in a child process (engine + node:http, 1 ORT intra-op thread, maxWaitMs 2); closed-loop clients in this process, one act request (one 160×160 PNG as base64) at a time each, 0.3 s warm-up; raw = session.run on pre-packed batches in this process',
    policy: { spec: 'default', params: paramCount(spec) },
    preprocessMsPerObservation: round(preprocessMs, 3),
    raw,
    server,
    threadedPreprocessing: threaded,
    best: { ...best, rawSamplesPerSecAtMeanBatch: rawAt(best.meanBatch), ratioToRaw: round(ratio, 3) },
  };
  const dir = path.resolve(__dirname, '..', 'docs', 'bench');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'policy-throughput.json'), `${JSON.stringify(result, null, 2)}\n`);
  fs.writeFileSync(path.join(dir, 'policy-throughput.svg'), svgChart(server, raw));
  console.log(
    `[bench] best ${best.actionsPerSec} actions/s (maxBatch ${best.maxBatch}, concurrency ${best.concurrency}); raw ORT at B≈${best.meanBatch}: ${rawAt(best.meanBatch)}/s; ratio ${round(ratio, 3)}`
  );
  console.log(`[bench] wrote docs/bench/policy-throughput.json and .svg`);
}

if (require.main === module) {
  (process.argv.includes('--serve') ? serve() : main()).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
