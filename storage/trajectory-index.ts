/**
 * Append-only indexes of a campaign's trajectories and discard decisions, so the viewer answers "the
 * trajectories of task T", "those of policy version v", "the newest ones" or "discards over time" by
 * reading a few index objects instead of listing and reading MinIO object by object.
 *
 * Layout (one log per partition): `campaigns/<id>/index/<stream>/<dim>=<value>/`
 *   - `d-<ms>-<hash>.jsonl`          a delta: the entries of one write (never rewritten)
 *   - `s<L>-<ms>-<hash>.jsonl`       a segment: FANOUT deltas (L=1) or FANOUT level L−1 segments merged
 * Partitions of the `trajectories` stream: `task=<taskId>`, `version=<v>` (each version a trajectory's
 * steps came from) and `hour=<YYYYMMDDHH>` (of createdAt, UTC: newest-first paging over the campaign);
 * the `discards` stream has one partition, `all`.
 *
 * Writers only ever add objects. A process's appends to one campaign's stream are group-committed: those
 * that arrive while a write is in flight, or within the linger an append allows, share the next delta
 * (AppendBatcher). Every FANOUT appends to a partition (and on its first one) the writer compacts it in
 * the background: FANOUT of its own deltas (or of deltas older than FOREIGN_DELTA_MIN_AGE_MS, whose writer
 * is likely gone), or FANOUT segments of one level, become one segment (putIfAbsent under a key derived
 * from what it merges, so two writers compacting the same set write one object), and then are deleted.
 * Writers racing on different sets, or a crash between write and delete, leave an entry in two objects;
 * readers de-duplicate by id (the latest `indexedAt` wins), so that costs bytes, never correctness. A
 * partition therefore holds fewer than FANOUT deltas per live writer, the last 10 minutes' deltas of
 * writers that stopped, fewer than FANOUT older ones (plus what one pass has not merged yet) and < FANOUT
 * segments per level: reading one is a bounded number of GETs whatever the campaign's size.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { DISCARD_EVENTS, type DiscardRecord } from '../schemas/discards';
import { EPISODE_STATUSES, type TrajectoryManifest } from '../schemas/records';
import { CorruptObjectError, ObjectNotFoundError } from './errors';
import { safeSegment } from './keys';
import { serializeJsonLines, type ObjectStore } from './object-store';
import { mapLimit } from '../lib/concurrency';

/** Deltas per level-1 segment, and segments per next-level segment. */
export const FANOUT = 32;
/** A trajectory whose steps span more versions than this is indexed under its min and max version only. */
const MAX_VERSION_PARTITIONS = 8;
const READ_CONCURRENCY = 16;

export const TrajectoryIndexEntrySchema = z.object({
  trajectoryId: z.string().min(1),
  groupId: z.string().min(1),
  taskId: z.string().min(1),
  reward: z.number().nullable(),
  status: z.enum(EPISODE_STATUSES),
  source: z.enum(['rollout', 'precollect', 'demo']),
  minVersion: z.number().int().nonnegative(),
  maxVersion: z.number().int().nonnegative(),
  steps: z.number().int().nonnegative(),
  maxSteps: z.number().int().positive(),
  createdAt: z.number(),
  /** When this entry was written: of two entries for one trajectory (a retried episode) the later wins. */
  indexedAt: z.number(),
});
export type TrajectoryIndexEntry = z.infer<typeof TrajectoryIndexEntrySchema>;

/** One (discard record, reason) pair: enough for discard reasons over time without reading the records. */
export const DiscardIndexEntrySchema = z.object({
  /** `<groupId>-<event>-<reason>`: one record's reason (a rewrite of the record replaces it). */
  id: z.string().min(1),
  groupId: z.string().min(1),
  taskId: z.string().min(1),
  event: z.enum(DISCARD_EVENTS),
  reason: z.string().min(1),
  trajectories: z.number().int().positive(),
  trainStep: z.number().int().nonnegative(),
  policyVersion: z.number().int().nonnegative(),
  createdAt: z.number(),
  indexedAt: z.number(),
});
export type DiscardIndexEntry = z.infer<typeof DiscardIndexEntrySchema>;

export type IndexStream = 'trajectories' | 'discards';
const SCHEMAS = { trajectories: TrajectoryIndexEntrySchema, discards: DiscardIndexEntrySchema } as const;
const idOf = (e: TrajectoryIndexEntry | DiscardIndexEntry): string => ('trajectoryId' in e ? e.trajectoryId : e.id);

export const indexKeys = {
  stream: (campaignId: string, stream: IndexStream) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/index/${stream}/`,
  partition: (campaignId: string, stream: IndexStream, partition: string) =>
    `${indexKeys.stream(campaignId, stream)}${partition}/`,
};

export const partitions = {
  task: (taskId: string) => `task=${safeSegment(taskId, 'taskId')}`,
  version: (v: number) => `version=${String(v).padStart(6, '0')}`,
  hour: (ms: number) => `hour=${new Date(ms).toISOString().slice(0, 13).replace(/[-T]/g, '')}`,
  all: 'all',
};

/** The UTC hour a `hour=` partition names, as epoch ms (NaN for anything else). */
export function hourOfPartition(name: string): number {
  const m = /^hour=(\d{4})(\d{2})(\d{2})(\d{2})$/.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4])) : NaN;
}

export function indexEntryOf(m: TrajectoryManifest, indexedAt: number): TrajectoryIndexEntry {
  return {
    trajectoryId: m.trajectoryId,
    groupId: m.groupId,
    taskId: m.taskId,
    reward: m.reward,
    status: m.status,
    source: m.source,
    minVersion: m.minPolicyVersion,
    maxVersion: m.maxPolicyVersion,
    steps: m.numSteps,
    maxSteps: m.maxSteps,
    createdAt: m.createdAt,
    indexedAt,
  };
}

/** The partitions a trajectory entry is written to. */
export function trajectoryPartitions(e: TrajectoryIndexEntry): string[] {
  const versions =
    e.maxVersion - e.minVersion < MAX_VERSION_PARTITIONS
      ? Array.from({ length: e.maxVersion - e.minVersion + 1 }, (_, i) => e.minVersion + i)
      : [e.minVersion, e.maxVersion];
  return [partitions.task(e.taskId), partitions.hour(e.createdAt), ...versions.map(partitions.version)];
}

const pad13 = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(13, '0');
const shortHash = (text: string | Uint8Array) => createHash('sha256').update(text).digest('hex').slice(0, 16);

interface Listed {
  deltas: string[];
  /** level → segment keys, oldest first. */
  segments: Map<number, string[]>;
}

async function listPartition(store: ObjectStore, prefix: string): Promise<Listed & { all: string[] }> {
  const all = await store.list(prefix);
  const deltas: string[] = [];
  const segments = new Map<number, string[]>();
  for (const key of all) {
    const name = key.slice(prefix.length);
    if (name.startsWith('d-')) deltas.push(key);
    const s = /^s(\d+)-/.exec(name);
    if (s) segments.set(Number(s[1]), [...(segments.get(Number(s[1])) ?? []), key]);
  }
  return { all, deltas, segments };
}

/** Keeps the latest-indexed entry per id. */
function dedupe<T extends TrajectoryIndexEntry | DiscardIndexEntry>(entries: T[]): T[] {
  const byId = new Map<string, T>();
  for (const e of entries) {
    const prev = byId.get(idOf(e));
    if (!prev || e.indexedAt >= prev.indexedAt) byId.set(idOf(e), e);
  }
  return [...byId.values()];
}

/**
 * Merges `members` (deltas, or segments of one level) into one segment of `level`, then deletes them.
 * Unreadable members stay where they are (readers report them); the readable ones are merged.
 */
async function mergeInto(
  store: ObjectStore,
  prefix: string,
  stream: IndexStream,
  level: number,
  members: string[]
): Promise<void> {
  const schema = SCHEMAS[stream] as z.ZodType<TrajectoryIndexEntry | DiscardIndexEntry>;
  const read = await mapLimit(members, READ_CONCURRENCY, async (key) => {
    // A delta this process wrote needs no GET: its entries are still in memory.
    const own = ownDeltas.get(store, key);
    if (own) return { key, entries: own };
    try {
      return { key, entries: await store.getJsonLines(key, schema) };
    } catch (err) {
      // Deleted by a concurrent compaction (its content is in that writer's segment): see below.
      if (err instanceof ObjectNotFoundError) return 'vanished' as const;
      if (err instanceof CorruptObjectError) return null; // unreadable: stays where it is, the rest is merged
      throw err;
    }
  });
  // Another writer is merging (and has deleted) some of these members: its segment holds them, and a
  // segment of the rest here would only duplicate entries; what it did not take, a later pass merges.
  if (read.includes('vanished')) return;
  const ok = read.filter(
    (r): r is { key: string; entries: Array<TrajectoryIndexEntry | DiscardIndexEntry> } => !!r && r !== 'vanished'
  );
  if (ok.length === 0) return;
  const entries = dedupe(ok.flatMap((r) => r.entries)).sort((a, b) => a.indexedAt - b.indexedAt);
  const firstName = ok[0]!.key.slice(prefix.length);
  const firstMs = pad13(msOfIndexObject(firstName) || (entries[0]?.indexedAt ?? 0));
  // Named by what it merges: two writers compacting the same members produce the same key (written once).
  const key = `${prefix}s${level}-${firstMs}-${shortHash(ok.map((r) => r.key).join('\n'))}.jsonl`;
  await store.putBytesIfAbsent(key, serializeJsonLines(entries), 'application/x-ndjson');
  // One multi-object DELETE for the merged members (they were one request each: a third of the index's
  // MinIO requests in an `npm start` run).
  await store.removeMany(ok.map((r) => r.key));
  for (const r of ok) ownDeltas.forget(store, r.key);
}

/** Another writer's deltas younger than this are left to that writer (see compactPartition). */
export const FOREIGN_DELTA_MIN_AGE_MS = 10 * 60_000;

/** The epoch ms an index object's name starts with (`d-<ms>-…`, `s<L>-<ms>-…`); 0 when it has none. */
function msOfIndexObject(name: string): number {
  const m = /^(?:d|s\d+)-(\d{13})-/.exec(name);
  return m ? Number(m[1]) : 0;
}

/**
 * One compaction pass over a partition: full batches of this process's deltas and of abandoned ones,
 * then full levels of segments.
 */
export async function compactPartition(
  store: ObjectStore,
  campaignId: string,
  stream: IndexStream,
  partition: string
): Promise<void> {
  const prefix = indexKeys.partition(campaignId, stream, partition);
  let listed = await listPartition(store, prefix);
  let changed = false;
  // This process's own deltas (merged from memory), then other writers' deltas old enough that their
  // writer is likely gone: a live writer merges its own every FANOUT appends without reading them back,
  // so merging them here too would read each one (two env workers: a third of the index's requests).
  const own: string[] = [];
  const abandoned: string[] = [];
  for (const k of listed.deltas) {
    if (ownDeltas.get(store, k)) own.push(k);
    else if (Date.now() - msOfIndexObject(k.slice(prefix.length)) >= FOREIGN_DELTA_MIN_AGE_MS) abandoned.push(k);
  }
  for (const deltas of [own, abandoned])
    for (let i = 0; i + FANOUT <= deltas.length; i += FANOUT) {
      await mergeInto(store, prefix, stream, 1, deltas.slice(i, i + FANOUT));
      changed = true;
    }
  if (changed) listed = await listPartition(store, prefix);
  for (let level = 1; level < 12; level++) {
    const segs = listed.segments.get(level) ?? [];
    if (segs.length < FANOUT) continue;
    for (let i = 0; i + FANOUT <= segs.length; i += FANOUT)
      await mergeInto(store, prefix, stream, level + 1, segs.slice(i, i + FANOUT));
    listed = await listPartition(store, prefix);
  }
}

/**
 * Compactions run in the background of the write path (an episode's latency is its delta PUTs, not the
 * merge), at most one per partition per process; a request while one runs makes it run once more.
 */
const compacting = new Map<string, { again: boolean; done: Promise<void> }>();

/**
 * Deltas this process appended to each partition since it last started a compaction pass there. A pass
 * lists the partition, so it runs only when it can find a full batch of this process's own deltas (every
 * FANOUT appends) and once on a process's first append to a partition, which merges what earlier writers
 * (a killed env worker) left, once old enough. A partition thus holds a bounded number of objects to read
 * (see the header).
 */
const appendsSincePass = new Map<string, number>();

function scheduleCompaction(store: ObjectStore, campaignId: string, stream: IndexStream, partition: string): void {
  const id = `${store.bucket}/${indexKeys.partition(campaignId, stream, partition)}`;
  const running = compacting.get(id);
  if (running) {
    running.again = true;
    return;
  }
  const state = { again: false, done: Promise.resolve() };
  state.done = (async () => {
    do {
      state.again = false;
      // A failed compaction loses nothing (the deltas stay and are read as they are); the next append retries.
      await compactPartition(store, campaignId, stream, partition).catch(() => undefined);
    } while (state.again);
    compacting.delete(id);
  })();
  compacting.set(id, state);
}

function noteAppend(store: ObjectStore, campaignId: string, stream: IndexStream, partition: string): void {
  const id = `${store.bucket}/${indexKeys.partition(campaignId, stream, partition)}`;
  const since = appendsSincePass.get(id);
  if (since !== undefined && since + 1 < FANOUT) {
    appendsSincePass.set(id, since + 1);
    return;
  }
  appendsSincePass.set(id, 0);
  scheduleCompaction(store, campaignId, stream, partition);
}

/** Resolves when the background compactions this process started have finished (tests, benchmarks, shutdown). */
export async function compactionsSettled(): Promise<void> {
  while (compacting.size > 0) await Promise.all([...compacting.values()].map((c) => c.done));
}

type IndexEntry = TrajectoryIndexEntry | DiscardIndexEntry;

/**
 * The entries of the deltas this process wrote and compaction has not merged yet, so merging them needs
 * no GET (another third of the index's MinIO requests; other writers' deltas are still read). Bounded:
 * deltas that are never merged (a partition that stops growing below FANOUT, e.g. an old version) are
 * dropped oldest first and read from MinIO if a merge ever needs them.
 */
const ownDeltas = (() => {
  const MAX = 4096;
  const byStore = new WeakMap<ObjectStore, Map<string, IndexEntry[]>>();
  const of = (store: ObjectStore) => {
    let m = byStore.get(store);
    if (!m) byStore.set(store, (m = new Map()));
    return m;
  };
  return {
    get: (store: ObjectStore, key: string) => byStore.get(store)?.get(key),
    remember(store: ObjectStore, key: string, entries: IndexEntry[]) {
      const m = of(store);
      m.set(key, entries);
      if (m.size > MAX) m.delete(m.keys().next().value!);
    },
    forget: (store: ObjectStore, key: string) => byStore.get(store)?.delete(key),
  };
})();

/** Writes one delta per partition (in parallel), then counts the appends towards compaction. */
async function writeDeltas(
  store: ObjectStore,
  campaignId: string,
  stream: IndexStream,
  byPartition: Map<string, IndexEntry[]>,
  now: number
): Promise<void> {
  await Promise.all(
    [...byPartition].map(async ([partition, entries]) => {
      const prefix = indexKeys.partition(campaignId, stream, partition);
      const body = serializeJsonLines(entries);
      const key = `${prefix}d-${pad13(now)}-${shortHash(body)}.jsonl`;
      await store.putBytes(key, body, 'application/x-ndjson');
      ownDeltas.remember(store, key, entries);
    })
  );
  for (const p of byPartition.keys()) noteAppend(store, campaignId, stream, p);
}

interface PendingAppend {
  byPartition: Map<string, IndexEntry[]>;
  /** The earliest `now` of the appends in it: the delta's name. */
  now: number;
  /** Entries in it (over all partitions). */
  entries: number;
  /** Wall-clock ms by which it must be written: the earliest of its appends' `now + lingerMs`. */
  dueAt: number;
  written: Promise<void>;
  settle: (err?: unknown) => void;
}

/** A batch this large is written at once, whatever its appends' linger allows. */
export const MAX_LINGER_ENTRIES = 1024;

/**
 * Group commit of one (bucket, campaign, stream)'s appends: an append waits until a delta holding its
 * entries is stored (as a lone append did), and the appends that arrive while one write is in flight share
 * the next one. An append may also allow its write to linger (`lingerMs`) so that the appends of the next
 * moments join it: a batch is written at the earliest deadline of its appends (or at once when it holds
 * MAX_LINGER_ENTRIES). An env worker finishing dozens of episodes per second thus writes a delta per
 * partition every few hundred ms instead of one per episode or two; an append without linger is written
 * on the next turn of the event loop, as before.
 */
class AppendBatcher {
  private pending: PendingAppend | null = null;
  private writing = false;
  private timer: { at: number; cancel: () => void } | null = null;

  constructor(
    private readonly store: ObjectStore,
    private readonly campaignId: string,
    private readonly stream: IndexStream
  ) {}

  append(byPartition: Map<string, IndexEntry[]>, now: number, lingerMs: number): Promise<void> {
    if (!this.pending) {
      let settle: (err?: unknown) => void = () => undefined;
      const written = new Promise<void>((resolve, reject) => {
        settle = (err) => (err === undefined ? resolve() : reject(err instanceof Error ? err : new Error(String(err))));
      });
      this.pending = { byPartition: new Map(), now, entries: 0, dueAt: Infinity, written, settle };
    }
    const batch = this.pending;
    for (const [partition, entries] of byPartition) {
      const list = batch.byPartition.get(partition);
      if (list) list.push(...entries);
      else batch.byPartition.set(partition, [...entries]);
      batch.entries += entries.length;
    }
    batch.now = Math.min(batch.now, now);
    // Wall clock, not `now` (callers may index with the record's own time).
    batch.dueAt = Math.min(batch.dueAt, Date.now() + Math.max(0, lingerMs));
    this.schedule();
    return batch.written;
  }

  /** Arms the write of the pending batch for its deadline (after the write in flight, if any). */
  private schedule(): void {
    const batch = this.pending;
    if (this.writing || !batch) return; // afterFlush schedules again
    const wait = batch.entries >= MAX_LINGER_ENTRIES ? 0 : Math.max(0, batch.dueAt - Date.now());
    const at = Date.now() + wait;
    if (this.timer && this.timer.at <= at) return;
    this.timer?.cancel();
    if (wait === 0) {
      // One macrotask of delay lets the appends of the same moment (a burst of finishing episodes) join.
      const handle = setImmediate(() => this.flush());
      this.timer = { at, cancel: () => clearImmediate(handle) };
    } else {
      const handle = setTimeout(() => this.flush(), wait);
      this.timer = { at, cancel: () => clearTimeout(handle) };
    }
  }

  private flush(): void {
    this.timer = null;
    const batch = this.pending;
    this.pending = null;
    if (!batch) return;
    this.writing = true;
    writeDeltas(this.store, this.campaignId, this.stream, batch.byPartition, batch.now).then(
      () => this.afterFlush(batch),
      (err: unknown) => this.afterFlush(batch, err)
    );
  }

  private afterFlush(batch: PendingAppend, err?: unknown): void {
    batch.settle(err ?? undefined);
    this.writing = false;
    this.schedule();
  }
}

const batchers = new WeakMap<ObjectStore, Map<string, AppendBatcher>>();

/** Appends entries to their partitions' logs; resolves once they are stored (see AppendBatcher). */
function append(
  store: ObjectStore,
  campaignId: string,
  stream: IndexStream,
  byPartition: Map<string, IndexEntry[]>,
  now: number,
  lingerMs = 0
): Promise<void> {
  let perStore = batchers.get(store);
  if (!perStore) batchers.set(store, (perStore = new Map()));
  const id = `${campaignId}\n${stream}`;
  let batcher = perStore.get(id);
  if (!batcher) perStore.set(id, (batcher = new AppendBatcher(store, campaignId, stream)));
  return batcher.append(byPartition, now, lingerMs);
}

/**
 * The write-path hook: indexes a trajectory whose manifest was just stored (runEpisode). A retried
 * episode indexes again; its later entry wins over the failed attempt's. `lingerMs`: how long the write
 * may wait for other appends to share its delta (resolves once the entry is stored either way).
 */
export async function indexTrajectory(
  store: ObjectStore,
  manifest: TrajectoryManifest,
  now = Date.now(),
  opts: { lingerMs?: number } = {}
): Promise<void> {
  const entry = indexEntryOf(manifest, now);
  const byPartition = new Map(trajectoryPartitions(entry).map((p) => [p, [entry]]));
  await append(store, manifest.campaignId, 'trajectories', byPartition, now, opts.lingerMs);
}

/**
 * What recordDiscards writes (its input): campaign discard decisions. An entry stamped with its own
 * policyVersion/trainStep (the campaign's head when it decided) keeps them; the batch's pair covers the
 * rest (runs that wrote one batch per train step).
 */
export interface DiscardBatch {
  campaignId: string;
  policyVersion: number;
  trainStep: number;
  entries: Array<
    Pick<DiscardRecord, 'groupId' | 'taskId' | 'event' | 'trajectories'> & {
      policyVersion?: number;
      trainStep?: number;
    }
  >;
}

/** The write-path hook for discard records (recordDiscards): one entry per record and reason. */
export async function indexDiscards(store: ObjectStore, batch: DiscardBatch, now = Date.now()): Promise<void> {
  const entries: DiscardIndexEntry[] = [];
  for (const r of batch.entries) {
    const counts = new Map<string, number>();
    for (const t of r.trajectories) counts.set(t.reason, (counts.get(t.reason) ?? 0) + 1);
    for (const [reason, n] of counts)
      entries.push({
        id: `${r.groupId}-${r.event}-${reason}`,
        groupId: r.groupId,
        taskId: r.taskId,
        event: r.event,
        reason,
        trajectories: n,
        trainStep: r.trainStep ?? batch.trainStep,
        policyVersion: r.policyVersion ?? batch.policyVersion,
        createdAt: now,
        indexedAt: now,
      });
  }
  if (entries.length > 0) await append(store, batch.campaignId, 'discards', new Map([[partitions.all, entries]]), now);
}

/**
 * Writes entries straight into level-1 segments of their partitions, FANOUT-sized or smaller (bulk
 * import and the viewer benchmark; the result reads exactly like compacted deltas).
 */
export async function writeSegments(
  store: ObjectStore,
  campaignId: string,
  stream: IndexStream,
  byPartition: Map<string, Array<TrajectoryIndexEntry | DiscardIndexEntry>>,
  chunk = FANOUT ** 2
): Promise<number> {
  const jobs: Array<{ key: string; body: Buffer }> = [];
  for (const [partition, entries] of byPartition) {
    const prefix = indexKeys.partition(campaignId, stream, partition);
    const sorted = [...entries].sort((a, b) => a.indexedAt - b.indexedAt);
    for (let i = 0; i < sorted.length; i += chunk) {
      const part = sorted.slice(i, i + chunk);
      const body = serializeJsonLines(part);
      // A chunk of FANOUT² entries is what level 2 holds; smaller remainders are level-1 segments.
      const level = part.length >= FANOUT ** 2 ? 2 : 1;
      jobs.push({ key: `${prefix}s${level}-${pad13(part[0]!.indexedAt)}-${shortHash(body)}.jsonl`, body });
    }
  }
  await mapLimit(jobs, READ_CONCURRENCY, (j) => store.putBytes(j.key, j.body, 'application/x-ndjson'));
  return jobs.length;
}

export interface IndexRead<T> {
  entries: T[];
  /** Index objects that could not be read, with the reason (the others' entries are still returned). */
  unreadable: Array<{ key: string; message: string }>;
  /** Objects read (for the benchmark and the page's cost note). */
  objects: number;
}

/**
 * All entries of one partition, de-duplicated. An object deleted between listing and reading was merged
 * by a concurrent compaction: the partition is listed and read again (a few times at most).
 */
export async function readPartition<S extends IndexStream>(
  store: ObjectStore,
  campaignId: string,
  stream: S,
  partition: string
): Promise<IndexRead<S extends 'trajectories' ? TrajectoryIndexEntry : DiscardIndexEntry>> {
  type E = S extends 'trajectories' ? TrajectoryIndexEntry : DiscardIndexEntry;
  const schema = SCHEMAS[stream] as unknown as z.ZodType<E>;
  const prefix = indexKeys.partition(campaignId, stream, partition);
  for (let attempt = 1; ; attempt++) {
    const { deltas, segments } = await listPartition(store, prefix);
    const keysToRead = [...[...segments.values()].flat(), ...deltas];
    let raced = false;
    const read = await mapLimit(keysToRead, READ_CONCURRENCY, async (key) => {
      try {
        return { key, entries: await store.getJsonLines(key, schema) };
      } catch (err) {
        if (err instanceof ObjectNotFoundError) {
          raced = true;
          return { key, entries: [] as E[] };
        }
        if (err instanceof CorruptObjectError) return { key, entries: [] as E[], message: err.reason };
        throw err;
      }
    });
    if (raced && attempt < 4) continue;
    return {
      entries: dedupe(read.flatMap((r) => r.entries)),
      unreadable: read.flatMap((r) => ('message' in r && r.message ? [{ key: r.key, message: r.message }] : [])),
      objects: keysToRead.length,
    };
  }
}

/** Partition names of a stream with a given dimension (`task`, `version`, `hour`), in key order. */
export async function listPartitions(
  store: ObjectStore,
  campaignId: string,
  stream: IndexStream,
  dim: 'task' | 'version' | 'hour'
): Promise<string[]> {
  const base = indexKeys.stream(campaignId, stream);
  const out: string[] = [];
  const listing = store.client.listObjectsV2(store.bucket, `${base}${dim}=`, false);
  for await (const item of listing as AsyncIterable<{ prefix?: string }>)
    if (item.prefix) out.push(item.prefix.slice(base.length).replace(/\/$/, ''));
  return out.sort();
}
