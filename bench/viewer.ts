/**
 * Viewer page timings at campaign scale (issue 16.4): a synthetic but realistically shaped campaign of
 * 100,000 trajectories in a fresh bucket of the real MinIO — its trajectory index (task, version and hour
 * partitions, compacted as the write path leaves them, the newest few hundred written through the write
 * path itself), every trajectory's manifest, steps and screenshots for a sample of groups, 1,500 train
 * steps with checkpoints (a few rollbacks), each with its per-sample training record (one row per trained
 * step, as both trainers write it), discard decisions and the experience pool — then the viewer, in
 * process, answers each page repeatedly; p50/p95 of the full response over HTTP.
 *
 *   npm run bench -- viewer [--trajectories 100000] [--manifests 100000] [--repeats 20] [--keep]
 *
 * Output: viewer.json in .data/bench (docs/bench with --publish).
 */
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { PNG } from 'pngjs';
import { loadInfraSettings } from '../infra/settings';
import { connectClient } from '../infra/temporal-connection';
import { DISCARD_EVENTS } from '../schemas/discards';
import {
  CheckpointManifestSchema,
  LedgerEntrySchema,
  TrainSampleRecordSchema,
  TrajectoryManifestSchema,
  type StepRecord,
  type TrajectoryManifest,
} from '../schemas/records';
import { keys } from '../storage/keys';
import { ObjectStore } from '../storage/object-store';
import {
  compactionsSettled,
  indexEntryOf,
  indexTrajectory,
  partitions,
  trajectoryPartitions,
  writeSegments,
  type DiscardIndexEntry,
  type TrajectoryIndexEntry,
} from '../storage/trajectory-index';
import { startViewer } from '../viewer/server';
import { TemporalSource } from '../viewer/temporal-reader';
import { mapLimit } from '../lib/concurrency';
import { benchSuffix } from './lib/bench-cluster';
import { benchOutFile, shownPath } from './lib/output';
import { synthStep, synthTrainStep, unit } from './lib/viewer-train-samples';

const TASKS = 50;
const HOURS = 72;
const TRAJ_PER_VERSION = 64;
const SAMPLE_GROUPS = 200;
const THROUGH_WRITE_PATH = 300;
const WRITE_CONCURRENCY = 24;

/** Deterministic pseudo-random numbers (mulberry32): the same campaign every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function screenshot(i: number): Buffer {
  const png = new PNG({ width: 160, height: 160 });
  for (let p = 0; p < png.data.length; p += 4) {
    png.data[p] = (p * 7 + i * 40) % 256;
    png.data[p + 1] = (p * 3 + i * 90) % 256;
    png.data[p + 2] = 120;
    png.data[p + 3] = 255;
  }
  return PNG.sync.write(png);
}

interface Synth {
  manifests: TrajectoryManifest[];
  groups: Map<string, TrajectoryManifest[]>;
  versions: number;
}

/**
 * Groups of n = DART's dynamic rollout count (8 while a task's success is below 0.6, then ⌊9/sr − 7⌋),
 * step budgets that shrink as tasks get solved, success rising with time, 2 % pre-collected and 1 %
 * demonstrations, 1 % infrastructure failures, versions advancing every 64 trajectories.
 */
function synthesize(campaignId: string, total: number): Synth {
  const rand = rng(16);
  const t0 = Date.UTC(2025, 2, 3, 8);
  const skill = Array.from({ length: TASKS }, () => 0.1 + rand() * 0.5);
  const manifests: TrajectoryManifest[] = [];
  const groups = new Map<string, TrajectoryManifest[]>();
  let g = 0;
  while (manifests.length < total) {
    const task = Math.floor(rand() * TASKS);
    const progress = manifests.length / total;
    const sr = Math.min(0.97, skill[task]! + progress * 0.6);
    const n = sr >= 0.6 ? Math.max(1, Math.floor(9 / sr - 7)) : 8;
    const maxSteps = Math.max(6, Math.round(30 - progress * 15 + rand() * 4));
    const source = rand() < 0.02 ? 'precollect' : rand() < 0.01 ? 'demo' : 'rollout';
    const groupId = `g${String(g++).padStart(6, '0')}-${task}`;
    const at = t0 + Math.floor(progress * HOURS * 3_600_000);
    const version = Math.floor(manifests.length / TRAJ_PER_VERSION);
    const members: TrajectoryManifest[] = [];
    for (let e = 0; e < n && manifests.length < total; e++) {
      const trajectoryId = `${groupId}-e${e}`;
      const failed = rand() < 0.01;
      const win = !failed && rand() < sr;
      const steps = failed ? Math.floor(rand() * maxSteps) : win ? 3 + Math.floor(rand() * (maxSteps / 2)) : maxSteps;
      const m: TrajectoryManifest = {
        schemaVersion: 1,
        trajectoryId,
        campaignId,
        taskId: `task-${String(task).padStart(2, '0')}`,
        groupId,
        seed: g,
        instruction: `Task ${task}: click the button labelled ${g % 97}`,
        fields: [],
        reward: failed ? null : win ? 1 : 0,
        status: failed ? 'env_error' : 'ok',
        numSteps: steps,
        maxSteps,
        minPolicyVersion: Math.max(0, version - (rand() < 0.2 ? 1 : 0)),
        maxPolicyVersion: version,
        stepsKey: keys.trajectorySteps(campaignId, trajectoryId),
        stepsSha256: '0'.repeat(64),
        source,
        envKind: 'browser',
        createdAt: at + e * 900 + Math.floor(rand() * 800),
        ...(failed ? { error: 'env: page crashed' } : {}),
      };
      manifests.push(m);
      members.push(m);
    }
    groups.set(groupId, members);
  }
  return { manifests, groups, versions: Math.floor(total / TRAJ_PER_VERSION) + 1 };
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function benchViewer(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      trajectories: { type: 'string', default: '100000' },
      manifests: { type: 'string', default: '100000' },
      repeats: { type: 'string', default: '20' },
      keep: { type: 'boolean', default: false },
    },
  });
  const loadAtStart = os.loadavg();
  const total = Number(values.trajectories);
  const manifestCount = Math.min(total, Number(values.manifests));
  const repeats = Number(values.repeats);
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket(`bench-viewer-${benchSuffix()}`.toLowerCase());
  await store.ensureBucket();
  const campaignId = 'viewer-100k';
  const written: Record<string, number> = {};
  const t = (label: string, started: number) =>
    (written[`${label}Seconds`] = Math.round((Date.now() - started) / 100) / 10);

  console.log(`[viewer] synthesizing ${total} trajectories in bucket ${store.bucket}`);
  const synth = synthesize(campaignId, total);
  const sampleGroups = [...synth.groups.keys()].filter((_, i, all) => i % Math.ceil(all.length / SAMPLE_GROUPS) === 0);
  const viaWritePath = synth.manifests.slice(-THROUGH_WRITE_PATH);

  // 1. The index: bulk segments for all but the newest trajectories, which go through the write path.
  let started = Date.now();
  const byPartition = new Map<string, TrajectoryIndexEntry[]>();
  for (const m of synth.manifests.slice(0, -THROUGH_WRITE_PATH)) {
    const e = indexEntryOf(m, m.createdAt + 1000);
    for (const p of trajectoryPartitions(e)) {
      const list = byPartition.get(p) ?? [];
      list.push(e);
      byPartition.set(p, list);
    }
  }
  written.indexSegments = await writeSegments(store, campaignId, 'trajectories', byPartition as never);
  written.indexPartitions = byPartition.size;
  for (const m of viaWritePath) await indexTrajectory(store, m, m.createdAt + 1000);
  await compactionsSettled();
  t('index', started);

  // 2. Manifests (every trajectory by default), and steps + screenshots for the sampled groups.
  started = Date.now();
  const shots = await Promise.all([0, 1, 2, 3].map((i) => store.putScreenshot(screenshot(i))));
  const sampled = new Set(sampleGroups.flatMap((g) => synth.groups.get(g)!.map((m) => m.trajectoryId)));
  const toWrite = synth.manifests.filter((m, i) => i < manifestCount || sampled.has(m.trajectoryId));
  await mapLimit(toWrite, WRITE_CONCURRENCY, async (m) => {
    let manifest = m;
    if (sampled.has(m.trajectoryId)) {
      const steps: StepRecord[] = Array.from({ length: m.numSteps }, (_, s) => ({
        schemaVersion: 1,
        trajectoryId: m.trajectoryId,
        step: s,
        observationKey: shots[s % shots.length]!.key,
        observationSize: { width: 160, height: 160 },
        action: { type: 'click', x: ((s * 37) % 100) / 100, y: ((s * 53) % 100) / 100 },
        actionText: `click(start_box='(${(s * 37) % 100},${(s * 53) % 100})')`,
        ...synthStep(m, s),
        actionOk: true,
        startedAt: m.createdAt + s * 100,
        endedAt: m.createdAt + s * 100 + 80,
      }));
      const ref = await store.putJsonLines(m.stepsKey, steps);
      manifest = { ...m, stepsSha256: ref.sha256 };
    }
    await store.putJson(keys.trajectoryManifest(campaignId, m.trajectoryId), manifest, TrajectoryManifestSchema);
  });
  written.manifests = toWrite.length;
  written.stepFiles = sampled.size;
  t('manifests', started);

  // 3. Discard decisions (about one group in four, by a hash of the id, so the sampled groups hold both
  // kinds): those groups are not trained, the others are.
  const reasons = ['stale', 'down-sampled', 'curation:all-same-reward', 'unused-at-stop', 'lost-infra'];
  const discards: DiscardIndexEntry[] = [];
  let i = 0;
  for (const [groupId, members] of synth.groups) {
    i++;
    if (unit(`${groupId}/discard`) >= 0.25) continue;
    const reason = reasons[i % 7 === 0 ? 0 : i % 5 === 0 ? 4 : i % 3 === 0 ? 2 : 1]!;
    discards.push({
      id: `${groupId}-train-${reason}`,
      groupId,
      taskId: members[0]!.taskId,
      event: DISCARD_EVENTS[0],
      reason,
      trajectories: members.length,
      trainStep: members[0]!.maxPolicyVersion,
      policyVersion: members[0]!.maxPolicyVersion,
      createdAt: members[0]!.createdAt + 60_000,
      indexedAt: members[0]!.createdAt + 60_000,
    });
  }
  const discarded = new Set(discards.map((d) => d.groupId));

  // 4. Train steps, checkpoints (a rollback every ~150 versions: the next version trains from two back).
  // Train step v consumes the kept groups' rewarded trajectories of version v − 1 and writes, as both
  // trainers do, its per-sample record under its attempt's tag, named by the ledger entry.
  started = Date.now();
  const weights = await store.putBytes(`${keys.checkpointPrefix(campaignId)}shared-weights.bin`, Buffer.alloc(64));
  const versions = Array.from({ length: synth.versions }, (_, v) => v);
  const trained = new Set<string>();
  let sampleRows = 0;
  let sampleBytes = 0;
  let trainSteps = 0;
  await mapLimit(versions, WRITE_CONCURRENCY, async (v) => {
    const parent = v === 0 ? null : v % 150 === 0 && v > 2 ? v - 2 : v - 1;
    const batch =
      v === 0
        ? []
        : synth.manifests
            .slice((v - 1) * TRAJ_PER_VERSION, v * TRAJ_PER_VERSION)
            .filter((m) => m.reward !== null && !discarded.has(m.groupId));
    const step = batch.length > 0 ? synthTrainStep(batch, parent ?? 0) : undefined;
    await store.putJson(
      keys.checkpointManifest(campaignId, v),
      CheckpointManifestSchema.parse({
        schemaVersion: 1,
        campaignId,
        version: v,
        parentVersion: parent,
        specHash: 'bench',
        weights,
        ...(step ? { ledgerKey: keys.ledgerEntry(campaignId, v) } : {}),
        metrics: { loss: 1 / (1 + v / 100) },
        createdAt: Date.UTC(2025, 2, 3, 8) + v * 170_000,
      })
    );
    if (!step) return;
    const attempt = (0x9e3779b1 * v).toString(16).slice(-12).padStart(12, '0');
    const ref = await store.putJsonLines(keys.trainSamples(campaignId, v, attempt), step.rows, TrainSampleRecordSchema);
    sampleRows += step.rows.length;
    sampleBytes += ref.bytes;
    trainSteps++;
    for (const m of batch) trained.add(m.trajectoryId);
    await store.putJson(
      keys.ledgerEntry(campaignId, v),
      LedgerEntrySchema.parse({
        schemaVersion: 1,
        campaignId,
        trainStep: v,
        fromVersion: parent ?? 0,
        toVersion: v,
        consumed: batch.map((m) => ({
          trajectoryId: m.trajectoryId,
          manifestKey: keys.trajectoryManifest(campaignId, m.trajectoryId),
          groupId: m.groupId,
          reward: m.reward ?? 0,
          staleness: Math.max(0, (parent ?? 0) - m.minPolicyVersion),
        })),
        isWeight: step.isWeight,
        samples: { ...ref, rows: step.rows.length },
        metrics: step.metrics,
        startedAt: Date.UTC(2025, 2, 3, 8) + v * 170_000 - 20_000,
        createdAt: Date.UTC(2025, 2, 3, 8) + v * 170_000,
      })
    );
  });
  written.checkpoints = versions.length;
  written.trainSteps = trainSteps;
  written.trainSampleRows = sampleRows;
  written.trainSampleMiB = Math.round(sampleBytes / 1024 / 102.4) / 10;
  t('ledger', started);

  // 5. The discard index; the pool (4 per task).
  started = Date.now();
  written.discardEntries = discards.length;
  written.discardSegments = await writeSegments(store, campaignId, 'discards', new Map([[partitions.all, discards]]));
  const wins = new Map<string, TrajectoryManifest[]>();
  for (const m of synth.manifests) if (m.reward === 1) wins.set(m.taskId, [...(wins.get(m.taskId) ?? []), m].slice(-4));
  const poolEntries = [...wins.values()].flat();
  await mapLimit(poolEntries, WRITE_CONCURRENCY, (m) =>
    store.putJson(keys.poolEntry(campaignId, m.taskId, m.trajectoryId), {
      trajectoryId: m.trajectoryId,
      manifestKey: keys.trajectoryManifest(campaignId, m.trajectoryId),
      taskId: m.taskId,
      groupId: m.groupId,
      reward: m.reward,
      status: m.status,
      numSteps: m.numSteps,
      minPolicyVersion: m.minPolicyVersion,
      maxPolicyVersion: m.maxPolicyVersion,
      injectedFromPool: false,
      pooledAt: m.createdAt,
    })
  );
  written.poolEntries = poolEntries.length;
  t('discardsAndPool', started);
  console.log(`[viewer] written: ${JSON.stringify(written)}`);

  // 6. The viewer, in process, against the real Temporal (no workflow for this campaign) and MinIO.
  const token = `bench-${benchSuffix()}`;
  const temporal = new TemporalSource(
    () => connectClient(settings),
    settings.temporal.namespace,
    settings.temporal.uiUrl
  );
  const viewer = await startViewer({ store, temporal, token, port: 0 });
  const loadAtPages = os.loadavg();
  // Trajectory pages: one a train step consumed (found through the next checkpoints' ledger entries, its
  // rows read from the step's per-sample record) and one nothing consumed (a discarded group or a failed
  // episode: the page searches the whole window of versions after it).
  const trainedIds = [...sampled].filter((id) => trained.has(id));
  const untrainedIds = [...sampled].filter((id) => !trained.has(id));
  if (trainedIds.length === 0 || untrainedIds.length === 0)
    throw new Error(
      `sampled groups hold ${trainedIds.length} trained and ${untrainedIds.length} untrained trajectories`
    );
  const expect: Record<string, (body: string) => string | undefined> = {
    'trajectory (trained)': (body) =>
      /class="consumer"/.test(body) && /class="advantage"/.test(body)
        ? undefined
        : 'shows no consuming train step with per-step advantages',
    'trajectory (not trained)': (body) =>
      /not consumed by a train step/.test(body) ? undefined : 'does not say it was not consumed',
  };
  const newestVersion = synth.versions - 1;
  const pages: Record<string, (k: number) => string> = {
    campaign: () => `/campaigns/${campaignId}`,
    task: (k) => `/campaigns/${campaignId}/tasks/task-${String(k % TASKS).padStart(2, '0')}`,
    'search (task + outcome)': (k) =>
      `/campaigns/${campaignId}/search?task=task-${String(k % TASKS).padStart(2, '0')}&outcome=failure`,
    'search (policy version)': (k) => `/campaigns/${campaignId}/search?version=${newestVersion - 40 * k}`,
    'search (newest, no filter)': () => `/campaigns/${campaignId}/search`,
    'search (source=demo, scan)': () => `/campaigns/${campaignId}/search?source=demo`,
    'search (pool)': () => `/campaigns/${campaignId}/search?source=pool`,
    'trajectory (trained)': (k) => `/campaigns/${campaignId}/trajectories/${trainedIds[(k * 37) % trainedIds.length]}`,
    'trajectory (not trained)': (k) =>
      `/campaigns/${campaignId}/trajectories/${untrainedIds[(k * 37) % untrainedIds.length]}`,
    group: (k) => `/campaigns/${campaignId}/groups/${sampleGroups[(k * 13) % sampleGroups.length]}`,
  };
  const results: Record<
    string,
    { p50Ms: number; p95Ms: number; maxMs: number; requests: number; status: number; bytes: number; note?: string }
  > = {};
  try {
    for (const [name, path] of Object.entries(pages)) {
      const times: number[] = [];
      let status = 0;
      let bytes = 0;
      let note: string | undefined;
      for (let k = -1; k < repeats; k++) {
        const began = performance.now();
        const res = await fetch(`${viewer.url}${path(Math.max(0, k))}`, {
          headers: { Authorization: `Bearer ${token}` },
        });
        const body = await res.text();
        if (k >= 0) times.push(performance.now() - began); // k = -1 warms the connection and MinIO's caches
        status = res.status;
        bytes = body.length;
        note = /id="search-cost">\s*([^<]*)/.exec(body)?.[1]?.replace(/\s+/g, ' ').trim();
        if (res.status !== 200)
          throw new Error(`${name}: HTTP ${res.status} for ${path(Math.max(0, k))}: ${body.slice(0, 400)}`);
        const wrong = expect[name]?.(body);
        if (wrong) throw new Error(`${name}: ${path(Math.max(0, k))} ${wrong}`);
      }
      times.sort((a, b) => a - b);
      results[name] = {
        p50Ms: Math.round(percentile(times, 50)),
        p95Ms: Math.round(percentile(times, 95)),
        maxMs: Math.round(times.at(-1)!),
        requests: times.length,
        status,
        bytes,
        ...(note ? { note } : {}),
      };
      console.log(
        `[viewer] ${name.padEnd(28)} p50 ${results[name].p50Ms} ms, p95 ${results[name].p95Ms} ms${note ? ` (${note})` : ''}`
      );
    }
  } finally {
    await viewer.close();
    await temporal.close();
    if (!values.keep) {
      console.log(`[viewer] removing bucket ${store.bucket}`);
      await store.removePrefix('');
      await store.client.removeBucket(store.bucket);
    }
  }
  const out = {
    what: 'viewer page timings (full HTTP response, in-process viewer, real MinIO and Temporal) for one campaign',
    machine: '2-core shared dev box (other agents running)',
    loadAverage1m: {
      atStart: round2(loadAtStart[0]!),
      atPages: round2(loadAtPages[0]!),
      atEnd: round2(os.loadavg()[0]!),
    },
    trajectories: total,
    tasks: TASKS,
    versions: synth.versions,
    hours: HOURS,
    groups: synth.groups.size,
    written,
    repeats,
    pages: results,
    recordedAt: new Date().toISOString(),
  };
  const file = benchOutFile('viewer.json');
  fs.writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
  console.log(`[viewer] wrote ${shownPath(file)}`);
}
