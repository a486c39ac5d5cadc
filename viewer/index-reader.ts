/**
 * Trajectory search over the campaign's index (storage/trajectory-index.ts), newest first and paged:
 * a task filter reads that task's partition, a version filter that version's, anything else walks the
 * hour partitions from the newest down and stops once a page is full or SCAN_BUDGET entries were looked
 * at (the page then offers to go on). `source=pool` lists the experience pool instead (small by design:
 * a few successes per task). No page view reads more than a bounded number of index objects.
 */
import { z } from 'zod';
import { isSuccess } from '../algorithms/success';
import { TrajectorySummarySchema } from '../schemas/campaign';
import { keys } from '../storage/keys';
import type { ObjectStore } from '../storage/object-store';
import {
  hourOfPartition,
  listPartitions,
  partitions,
  readPartition,
  type IndexRead,
  type TrajectoryIndexEntry,
} from '../storage/trajectory-index';
import { checkId, notFound, toViewerError } from './errors';

export const OUTCOMES = ['success', 'failure', 'error'] as const;
export type Outcome = (typeof OUTCOMES)[number];
export const SOURCES = ['rollout', 'precollect', 'demo', 'pool'] as const;
export type SearchSource = (typeof SOURCES)[number];

/** Entries looked at per page view, at most, when no task or version narrows the search. */
export const SCAN_BUDGET = 20_000;
const HOURS_IN_PARALLEL = 4;

export interface SearchFilter {
  task?: string;
  outcome?: Outcome;
  version?: number;
  source?: SearchSource;
}

/** A position in newest-first order: rows strictly older than (at, id). */
export interface Cursor {
  at: number;
  id: string;
}
export const encodeCursor = (c: Cursor): string => `${c.at}_${c.id}`;
export function decodeCursor(raw: string): Cursor {
  const m = /^(\d{1,15})_(.*)$/.exec(raw);
  if (!m || (m[2] !== '' && checkId(m[2]!, 'trajectory') !== m[2]))
    throw notFound('Bad page cursor', `"${raw}" is not a page cursor (<ms>_<trajectory id>).`);
  return { at: Number(m[1]), id: m[2]! };
}

const newerFirst = (a: TrajectoryIndexEntry, b: TrajectoryIndexEntry) =>
  b.createdAt - a.createdAt || (a.trajectoryId < b.trajectoryId ? 1 : a.trajectoryId > b.trajectoryId ? -1 : 0);
const olderThan = (e: TrajectoryIndexEntry, c: Cursor) =>
  e.createdAt < c.at || (e.createdAt === c.at && e.trajectoryId < c.id);

/** Success is reward ≥ 1.0 (the default campaign.successThreshold; the page shows the raw reward too). */
export function outcomeOf(e: Pick<TrajectoryIndexEntry, 'status' | 'reward'>): Outcome {
  if (e.status !== 'ok') return 'error';
  return isSuccess(e.reward) ? 'success' : 'failure';
}

export interface SearchRow extends TrajectoryIndexEntry {
  /** Pool rows: when the success joined the pool. */
  pooledAt?: number;
}

export interface SearchResult {
  rows: SearchRow[];
  next?: string;
  /** Index entries looked at for this page. */
  scanned: number;
  /** Index objects read. */
  objects: number;
  unreadable: Array<{ key: string; message: string }>;
  /** True when the index holds nothing for this campaign at all (written before the index existed). */
  noIndex: boolean;
  /** Set when the scan stopped at SCAN_BUDGET before filling the page. */
  budgetHit?: boolean;
}

function matches(e: TrajectoryIndexEntry, f: SearchFilter): boolean {
  if (f.task !== undefined && partitions.task(e.taskId) !== partitions.task(f.task)) return false;
  if (f.version !== undefined && (e.minVersion > f.version || e.maxVersion < f.version)) return false;
  if (f.outcome !== undefined && outcomeOf(e) !== f.outcome) return false;
  if (f.source !== undefined && f.source !== 'pool' && e.source !== f.source) return false;
  return true;
}

async function read(
  store: ObjectStore,
  campaignId: string,
  partition: string
): Promise<IndexRead<TrajectoryIndexEntry>> {
  try {
    return await readPartition(store, campaignId, 'trajectories', partition);
  } catch (err) {
    throw toViewerError(err, 'trajectory index');
  }
}

function page(
  sorted: TrajectoryIndexEntry[],
  limit: number,
  before: Cursor | undefined
): { rows: TrajectoryIndexEntry[]; next?: string } {
  const from = before ? sorted.filter((e) => olderThan(e, before)) : sorted;
  const rows = from.slice(0, limit);
  const last = rows.at(-1);
  return {
    rows,
    next: from.length > limit && last ? encodeCursor({ at: last.createdAt, id: last.trajectoryId }) : undefined,
  };
}

/** The entries of one task (its partition), newest first. */
export async function readTask(
  store: ObjectStore,
  campaignId: string,
  taskId: string
): Promise<IndexRead<TrajectoryIndexEntry>> {
  const r = await read(store, campaignId, partitions.task(taskId));
  return { ...r, entries: r.entries.filter((e) => matches(e, { task: taskId })).sort(newerFirst) };
}

const PoolEntrySchema = TrajectorySummarySchema.extend({ pooledAt: z.number() });

/** The experience pool (of one task, or all), in key order; paged by the key. */
export async function readPool(
  store: ObjectStore,
  campaignId: string,
  opts: { task?: string; after?: string; limit: number }
): Promise<{ rows: SearchRow[]; next?: string; unreadable: Array<{ key: string; message: string }> }> {
  let all: string[];
  try {
    all = (await store.list(keys.poolPrefix(campaignId, opts.task))).filter((k) => k.endsWith('.json'));
  } catch (err) {
    throw toViewerError(err, 'experience pool');
  }
  const from = opts.after ? all.filter((k) => k > opts.after!) : all;
  const shown = from.slice(0, opts.limit);
  const unreadable: Array<{ key: string; message: string }> = [];
  const rows: SearchRow[] = [];
  await Promise.all(
    shown.map(async (key) => {
      try {
        const p = await store.getJson(key, PoolEntrySchema);
        rows.push({
          trajectoryId: p.trajectoryId,
          groupId: p.groupId,
          taskId: p.taskId,
          reward: p.reward,
          status: p.status === 'ok' ? 'ok' : 'env_error',
          source: 'rollout',
          minVersion: p.minPolicyVersion,
          maxVersion: p.maxPolicyVersion,
          steps: p.numSteps,
          maxSteps: Math.max(1, p.numSteps),
          createdAt: p.pooledAt,
          indexedAt: p.pooledAt,
          pooledAt: p.pooledAt,
        });
      } catch (err) {
        unreadable.push({ key, message: toViewerError(err, 'pool entry').detail });
      }
    })
  );
  rows.sort((a, b) => b.pooledAt! - a.pooledAt!);
  return { rows, next: from.length > opts.limit ? shown.at(-1) : undefined, unreadable };
}

export async function searchTrajectories(
  store: ObjectStore,
  campaignId: string,
  f: SearchFilter,
  opts: { before?: string; limit: number }
): Promise<SearchResult> {
  if (f.source === 'pool') {
    const pool = await readPool(store, campaignId, { task: f.task, after: opts.before, limit: opts.limit });
    const rows = pool.rows.filter((r) => matches(r, { ...f, task: undefined }));
    return {
      rows,
      next: pool.next,
      scanned: pool.rows.length,
      objects: pool.rows.length,
      unreadable: pool.unreadable,
      noIndex: false,
    };
  }
  const before = opts.before ? decodeCursor(opts.before) : undefined;
  const narrow =
    f.task !== undefined
      ? partitions.task(f.task)
      : f.version !== undefined
        ? partitions.version(f.version)
        : undefined;
  if (narrow) {
    const r = await read(store, campaignId, narrow);
    const sorted = r.entries.filter((e) => matches(e, f)).sort(newerFirst);
    const noIndex = r.objects === 0 && (await listPartitions(store, campaignId, 'trajectories', 'hour')).length === 0;
    return {
      ...page(sorted, opts.limit, before),
      scanned: r.entries.length,
      objects: r.objects,
      unreadable: r.unreadable,
      noIndex,
    };
  }

  // No narrowing partition: walk the hours from the newest (the cursor's hour first) down.
  let hours: string[];
  try {
    hours = (await listPartitions(store, campaignId, 'trajectories', 'hour')).reverse();
  } catch (err) {
    throw toViewerError(err, 'trajectory index');
  }
  if (before) hours = hours.filter((h) => hourOfPartition(h) <= before.at);
  const found: TrajectoryIndexEntry[] = [];
  const unreadable: SearchResult['unreadable'] = [];
  let scanned = 0;
  let objects = 0;
  let i = 0;
  // One hour first (it usually fills a page), then 2, then up to HOURS_IN_PARALLEL at a time.
  for (
    let width = 1;
    i < hours.length && found.length <= opts.limit && scanned < SCAN_BUDGET;
    width = Math.min(HOURS_IN_PARALLEL, width * 2)
  ) {
    const batch = await Promise.all(hours.slice(i, i + width).map((h) => read(store, campaignId, h)));
    i += batch.length;
    for (const r of batch) {
      scanned += r.entries.length;
      objects += r.objects;
      unreadable.push(...r.unreadable);
      found.push(...r.entries.filter((e) => matches(e, f) && (!before || olderThan(e, before))));
    }
  }
  found.sort(newerFirst);
  const { rows, next } = page(found, opts.limit, undefined);
  const result: SearchResult = { rows, next, scanned, objects, unreadable, noIndex: hours.length === 0 && !before };
  if (!next && i < hours.length) {
    // The budget ran out before the page filled: go on below the last hour read.
    const lastRead = hours[Math.min(i, hours.length) - 1]!;
    result.next = encodeCursor({ at: hourOfPartition(lastRead), id: '' });
    result.budgetHit = rows.length < opts.limit;
  }
  return result;
}
