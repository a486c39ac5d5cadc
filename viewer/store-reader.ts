/**
 * Everything the viewer reads from MinIO, read-only, with the project's zod schemas. Listing is paged
 * with S3's delimiter listing (one request names up to a page of trajectories), so a page view never
 * lists a whole campaign. Records that fail to parse are reported next to the ones that did, so one
 * corrupt ledger entry does not hide a campaign's other train steps.
 */
import { z } from 'zod';
import { DiscardRecordSchema, type DiscardRecord } from '../schemas/discards';
import {
  CheckpointManifestSchema,
  LedgerEntrySchema,
  StepRecordSchema,
  TrainSampleRecordSchema,
  TrajectoryManifestSchema,
  type LedgerEntry,
  type StepRecord,
  type TrainSampleRecord,
  type TrajectoryManifest,
} from '../schemas/records';
import { ObjectNotFoundError } from '../storage/errors';
import type { EvalPoint } from '../schemas/campaign';
import { keys } from '../storage/keys';
import type { ObjectStore } from '../storage/object-store';
import { toViewerError } from './errors';
import { mapLimit } from '../lib/concurrency';

/** EvalPoint as `recordEvalPoint` writes it (schemas/campaign.ts has the type, not a schema). */
export const EvalPointSchema: z.ZodType<EvalPoint> = z.object({
  version: z.number().int().nonnegative(),
  successRate: z.number(),
  episodes: z.number().int().nonnegative(),
  atEpisodes: z.number().int().nonnegative(),
  atMs: z.number(),
  perFamily: z.record(z.string(), z.number()),
});

/** How many records of one kind a campaign page reads at most (the newest ones). */
export const RECORD_LIMIT = 500;
const READ_CONCURRENCY = 8;

export interface Unreadable {
  key: string;
  message: string;
}
export interface Records<T> {
  items: T[];
  unreadable: Unreadable[];
  /** Records that exist but were not read (older than the newest RECORD_LIMIT). */
  omitted: number;
}

/**
 * Child "folders" of a prefix, in key order, after `after` (exclusive), at most `limit` of them.
 * Returns one more name than asked when there is a next page (the caller trims it).
 */
export async function listChildren(
  store: ObjectStore,
  prefix: string,
  opts: { after?: string; limit: number; startsWith?: string }
): Promise<string[]> {
  // "~" sorts after every character an id or a file name under it may hold, so paging skips the whole child.
  const startAfter = opts.after ? `${prefix}${opts.after}/~` : '';
  const stream = store.client.listObjectsV2(store.bucket, prefix + (opts.startsWith ?? ''), false, startAfter);
  const out: string[] = [];
  try {
    for await (const item of stream as AsyncIterable<{ prefix?: string }>) {
      if (!item.prefix) continue;
      out.push(item.prefix.slice(prefix.length).replace(/\/$/, ''));
      if (out.length > opts.limit) break;
    }
  } catch (err) {
    throw toViewerError(err, 'listing');
  } finally {
    (stream as unknown as { destroy?: () => void }).destroy?.();
  }
  return out;
}

async function readAll<T>(
  store: ObjectStore,
  prefix: string,
  schema: z.ZodType<T>,
  limit = RECORD_LIMIT
): Promise<Records<T>> {
  const all = (await store.list(prefix)).filter((k) => k.endsWith('.json'));
  const newest = all.slice(-limit);
  const read = await mapLimit(newest, READ_CONCURRENCY, async (key) => {
    try {
      return { ok: true as const, value: await store.getJson(key, schema) };
    } catch (err) {
      return { ok: false as const, bad: { key, message: toViewerError(err).detail } };
    }
  });
  return {
    items: read.flatMap((r) => (r.ok ? [r.value] : [])),
    unreadable: read.flatMap((r) => (r.ok ? [] : [r.bad])),
    omitted: all.length - newest.length,
  };
}

export const readLedger = (store: ObjectStore, campaignId: string): Promise<Records<LedgerEntry>> =>
  readAll(store, keys.ledgerPrefix(campaignId), LedgerEntrySchema);
export const readDiscards = (store: ObjectStore, campaignId: string): Promise<Records<DiscardRecord>> =>
  readAll(store, keys.discardPrefix(campaignId), DiscardRecordSchema);
export const readEvals = (store: ObjectStore, campaignId: string): Promise<Records<EvalPoint>> =>
  readAll(store, keys.evalPrefix(campaignId), EvalPointSchema);

/** Whether MinIO holds anything for this campaign (one small listing request). */
export async function campaignHasData(store: ObjectStore, campaignId: string): Promise<boolean> {
  const found = await listChildren(store, `campaigns/${campaignId}/`, { limit: 0 });
  return found.length > 0;
}

/** Campaign ids with data in the bucket (the campaigns/ folder, paged). */
export const listStoredCampaigns = (store: ObjectStore, limit = 200): Promise<string[]> =>
  listChildren(store, 'campaigns/', { limit });

export interface TrajectoryRow {
  trajectoryId: string;
  manifest?: TrajectoryManifest;
  error?: string;
}

export interface TrajectoryPage {
  rows: TrajectoryRow[];
  /** Cursor of the next page (the last id shown), when there is one. */
  next?: string;
}

export async function readTrajectoryPage(
  store: ObjectStore,
  campaignId: string,
  opts: { after?: string; limit: number; startsWith?: string }
): Promise<TrajectoryPage> {
  const ids = await listChildren(store, keys.trajectoryPrefix(campaignId), opts);
  const shown = ids.slice(0, opts.limit);
  const rows = await mapLimit(shown, READ_CONCURRENCY, async (trajectoryId): Promise<TrajectoryRow> => {
    try {
      return {
        trajectoryId,
        manifest: await store.getJson(keys.trajectoryManifest(campaignId, trajectoryId), TrajectoryManifestSchema),
      };
    } catch (err) {
      return { trajectoryId, error: toViewerError(err, 'manifest').detail };
    }
  });
  return { rows, next: ids.length > opts.limit ? shown.at(-1) : undefined };
}

export async function readManifest(
  store: ObjectStore,
  campaignId: string,
  trajectoryId: string
): Promise<TrajectoryManifest> {
  try {
    return await store.getJson(keys.trajectoryManifest(campaignId, trajectoryId), TrajectoryManifestSchema);
  } catch (err) {
    throw toViewerError(err, 'trajectory manifest');
  }
}

export async function readSteps(store: ObjectStore, manifest: TrajectoryManifest): Promise<StepRecord[]> {
  try {
    return await store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
  } catch (err) {
    throw toViewerError(err, 'steps file');
  }
}

/** The discard records of a group (keys `<groupId>-<event>.json`) that name this trajectory. */
export async function discardsOf(
  store: ObjectStore,
  campaignId: string,
  groupId: string,
  trajectoryId: string
): Promise<Array<{ record: DiscardRecord; reason: string }>> {
  const prefix = `${keys.discardPrefix(campaignId)}${groupId}-`;
  const found: Array<{ record: DiscardRecord; reason: string }> = [];
  for (const key of await store.list(prefix)) {
    const record = await store.getJson(key, DiscardRecordSchema).catch(() => null);
    // A longer group id can share the prefix ("g-1-" also starts "g-1-2-train.json"): match the record's own.
    if (!record || record.groupId !== groupId) continue;
    for (const t of record.trajectories) if (t.trajectoryId === trajectoryId) found.push({ record, reason: t.reason });
  }
  return found;
}

/** The trajectory ids of a group (`<groupId>-e<i>`), in episode order. */
export async function groupTrajectoryIds(store: ObjectStore, campaignId: string, groupId: string): Promise<string[]> {
  const ids = await listChildren(store, keys.trajectoryPrefix(campaignId), { limit: 256, startsWith: `${groupId}-e` });
  const episode = (id: string) => Number(id.slice(groupId.length + 2));
  return ids.filter((id) => /^\d+$/.test(id.slice(groupId.length + 2))).sort((a, b) => episode(a) - episode(b));
}

/**
 * How many checkpoint versions after a trajectory's newest policy version are searched for the train step
 * that consumed it. A step trains data of its head and the head's ancestors within maxStaleness (a few
 * versions), and every version it writes is numbered above the data's: the consumer is among the next
 * versions, unless the trajectory came back much later from the experience pool.
 */
export const CONSUMER_WINDOW = 12;
const CONSUMER_BATCH = 4;

/** One train step that consumed a trajectory, and what it did with each of the trajectory's steps. */
export interface Consumption {
  entry: LedgerEntry;
  injectedFromPool: boolean;
  /** step index → the step's sample record; empty when the entry names no record (older entries, BC). */
  samples: Map<number, TrainSampleRecord>;
  /** Why the per-sample record could not be read, when it could not. */
  samplesError?: string;
}

export interface TrainingOfTrajectory {
  consumers: Consumption[];
  /** The versions searched (after the trajectory's own), for the page's "not trained" note. */
  searched: { from: number; to: number };
  /** Checkpoint manifests or ledger entries in the window that could not be read. */
  unreadable: Unreadable[];
}

const LedgerKeyOnly = z.object({ ledgerKey: z.string().optional() });

/** The ledger key of version `v` (embedded policy `manifest.json`, else VLM `hf.json`); null if neither exists. */
async function ledgerKeyOfVersion(
  store: ObjectStore,
  campaignId: string,
  v: number
): Promise<string | undefined | null> {
  try {
    return (await store.getJson(keys.checkpointManifest(campaignId, v), CheckpointManifestSchema)).ledgerKey;
  } catch (err) {
    if (!(err instanceof ObjectNotFoundError)) throw err;
  }
  try {
    return (await store.getJson(keys.hfCheckpointManifest(campaignId, v), LedgerKeyOnly)).ledgerKey;
  } catch (err) {
    if (err instanceof ObjectNotFoundError) return null;
    throw err;
  }
}

/**
 * The train steps that consumed a trajectory, without reading the whole ledger: the checkpoint versions
 * after the trajectory's newest policy version (CONSUMER_WINDOW of them, a few at a time, stopping at the
 * first that does not exist or after the first batch with a consumer) name their ledger entries, and the
 * entries that list the trajectory name their per-sample records, which give each step's advantage,
 * selection and importance weight.
 */
export async function trainingOf(
  store: ObjectStore,
  campaignId: string,
  manifest: TrajectoryManifest
): Promise<TrainingOfTrajectory> {
  const from = manifest.maxPolicyVersion + 1;
  const consumers: Consumption[] = [];
  const unreadable: Unreadable[] = [];
  let to = from - 1;
  for (let start = from; start < from + CONSUMER_WINDOW && consumers.length === 0; start += CONSUMER_BATCH) {
    const versions = Array.from({ length: CONSUMER_BATCH }, (_, i) => start + i);
    const found = await Promise.all(
      versions.map(async (v) => {
        try {
          const ledgerKey = await ledgerKeyOfVersion(store, campaignId, v);
          if (ledgerKey === null) return { v, exists: false as const };
          if (!ledgerKey) return { v, exists: true as const };
          return { v, exists: true as const, entry: await store.getJson(ledgerKey, LedgerEntrySchema) };
        } catch (err) {
          unreadable.push({ key: `checkpoint v${v}`, message: toViewerError(err, 'train step record').detail });
          return { v, exists: true as const };
        }
      })
    );
    let ended = false;
    for (const f of found) {
      if (!f.exists) {
        ended = true;
        break;
      }
      to = f.v;
      const c = f.entry?.consumed.find((x) => x.trajectoryId === manifest.trajectoryId);
      if (f.entry && c) consumers.push({ entry: f.entry, injectedFromPool: c.injectedFromPool, samples: new Map() });
    }
    if (ended) break;
  }
  await Promise.all(
    consumers.map(async (c) => {
      const ref = c.entry.samples;
      if (!ref) return;
      try {
        for (const row of await store.getJsonLines(ref.key, TrainSampleRecordSchema, ref.sha256))
          if (row.trajectoryId === manifest.trajectoryId) c.samples.set(row.step, row);
      } catch (err) {
        c.samplesError = `${ref.key}: ${toViewerError(err, 'per-sample record').detail}`;
      }
    })
  );
  return {
    consumers: consumers.sort((a, b) => a.entry.trainStep - b.entry.trainStep),
    searched: { from, to },
    unreadable,
  };
}
