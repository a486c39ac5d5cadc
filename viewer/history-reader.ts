/**
 * The newest train steps (ledger/) and checkpoint versions (checkpoints/) without listing either prefix:
 * their keys carry a zero-padded number, so the highest one is found by a search over HEAD requests
 * (a handful of parallel rounds), and a page of the newest ones is then read by key. A campaign with thousands of train steps costs a page view the same as one
 * with ten.
 */
import {
  CheckpointManifestSchema,
  LedgerEntrySchema,
  type CheckpointManifest,
  type LedgerEntry,
} from '../schemas/records';
import { keys } from '../storage/keys';
import type { ObjectStore } from '../storage/object-store';
import { toViewerError } from './errors';

const MAX_NUMBER = 999_999; // keys pad to 6 digits

/** Whether any key under `prefix` sorts after `startAfter` (one listing request for one key). */
async function anyAfter(store: ObjectStore, prefix: string, startAfter: string): Promise<boolean> {
  const stream = store.client.listObjectsV2(store.bucket, prefix, true, startAfter);
  try {
    for await (const item of stream as AsyncIterable<{ name?: string }>) if (item.name) return true;
    return false;
  } catch (err) {
    throw toViewerError(err, 'listing');
  } finally {
    (stream as unknown as { destroy?: () => void }).destroy?.();
  }
}

/** Probes per round of the search below: one round costs one listing round trip, whatever the width. */
const PROBES_PER_ROUND = 15;

/**
 * The highest n for which a key `prefix + name(n)…` exists, or -1. `after(n)` is a string sorting after
 * every key of number n and before every key of n + 1. A 16-ary search: each round probes 15 points at
 * once, so a million numbers take 5 round trips (a binary search would take 20 in a row).
 */
export async function highestNumbered(
  store: ObjectStore,
  prefix: string,
  after: (n: number) => string
): Promise<number> {
  if (!(await anyAfter(store, prefix, ''))) return -1;
  let lo = -1; // a key with a number > lo exists
  let hi = MAX_NUMBER; // none > hi
  while (hi - lo > 1) {
    const step = Math.max(1, Math.ceil((hi - lo) / (PROBES_PER_ROUND + 1)));
    const points: number[] = [];
    for (let p = lo + step; p < hi; p += step) points.push(p);
    const found = await Promise.all(points.map((p) => anyAfter(store, prefix, after(p))));
    // Keys exist after every probe below the first "no": the answer lies between the last yes and that no.
    const firstNo = found.indexOf(false);
    if (firstNo === -1) lo = points.at(-1) ?? lo;
    else {
      hi = points[firstNo]!;
      if (firstNo > 0) lo = points[firstNo - 1]!;
    }
    if (points.length === 0) break;
  }
  return hi;
}

/** Numbers in a row that may be missing without ending the search (a train step that never committed). */
const GAP_TOLERANCE = 3;

/**
 * The highest n whose key `keyOf(n)` exists, by HEAD requests (a few ms each, where MinIO answers a
 * listing that starts after a key in tens to hundreds of ms on a large prefix): numbers count up from 0
 * or 1, so "n or one of the next GAP_TOLERANCE − 1 exists" holds up to the highest and not beyond it.
 * One parallel round of exponentially spaced probes brackets it, then 16-ary rounds narrow it down.
 * Returns undefined when none of the first numbers exists (the caller then searches by listing).
 */
async function highestByHead(store: ObjectStore, keyOf: (n: number) => string): Promise<number | undefined> {
  const exists = (n: number) =>
    n > MAX_NUMBER
      ? Promise.resolve(false)
      : store.exists(keyOf(n)).catch((err: unknown) => {
          throw toViewerError(err, 'listing');
        });
  // n itself first; its successors only when n is missing (most probes below the answer hit at once).
  const present = async (n: number) =>
    (await exists(n)) ||
    (await Promise.all(Array.from({ length: GAP_TOLERANCE - 1 }, (_, i) => exists(n + 1 + i)))).some(Boolean);

  // Numbers only grow: start from the last answer for this prefix (one round of HEADs when nothing new).
  const cacheKey = `${store.bucket}/${keyOf(0)}`;
  const known = highestSeen.get(cacheKey);
  let lo: number;
  if (known !== undefined && (await exists(known))) {
    const next = await Promise.all(Array.from({ length: GAP_TOLERANCE }, (_, i) => exists(known + 1 + i)));
    if (!next.some(Boolean)) return known;
    lo = known + 1 + next.lastIndexOf(true);
  } else {
    if (!(await present(0))) return undefined;
    lo = 0;
  }
  const gallop: number[] = [];
  for (let d = 1; lo + d <= MAX_NUMBER; d *= 2) gallop.push(lo + d);
  const seen = await Promise.all(gallop.map(present));
  const firstNo = seen.indexOf(false);
  if (firstNo === -1) return MAX_NUMBER;
  let hi = gallop[firstNo]!; // not present; lo is
  if (firstNo > 0) lo = gallop[firstNo - 1]!;
  while (hi - lo > 1) {
    const step = Math.max(1, Math.ceil((hi - lo) / (PROBES_PER_ROUND + 1)));
    const points: number[] = [];
    for (let p = lo + step; p < hi; p += step) points.push(p);
    const found = await Promise.all(points.map(present));
    const no = found.indexOf(false);
    if (no === -1) lo = points.at(-1)!;
    else {
      hi = points[no]!;
      if (no > 0) lo = points[no - 1]!;
    }
  }
  // present(lo) may hold through a successor: the answer is the highest number that exists.
  const tail = await Promise.all(Array.from({ length: GAP_TOLERANCE }, (_, i) => exists(lo + i)));
  const highest = lo + tail.lastIndexOf(true);
  highestSeen.set(cacheKey, highest);
  return highest;
}

/** prefix → the highest number found last time (per viewer process; bounded by the campaigns viewed). */
const highestSeen = new Map<string, number>();

const pad = (n: number) => String(n).padStart(6, '0');

export interface Numbered<T> {
  number: number;
  key: string;
  value?: T;
  /** Set when the object is missing or unreadable. */
  error?: string;
  missing?: boolean;
}

async function readNumbered<T>(
  store: ObjectStore,
  numbers: number[],
  keyOf: (n: number) => string,
  read: (key: string) => Promise<T>,
  what: string
): Promise<Array<Numbered<T>>> {
  return Promise.all(
    numbers.map(async (number): Promise<Numbered<T>> => {
      const key = keyOf(number);
      try {
        return { number, key, value: await read(key) };
      } catch (err) {
        const e = toViewerError(err, what);
        return { number, key, error: e.detail, missing: e.status === 404 };
      }
    })
  );
}

export interface NewestPage<T> {
  items: Array<Numbered<T>>;
  highest: number;
}

/** The `limit` newest train steps at or below `atOrBelow` (default: the newest). Missing numbers are skipped. */
export async function readLedgerPage(
  store: ObjectStore,
  campaignId: string,
  opts: { atOrBelow?: number; limit: number }
): Promise<NewestPage<LedgerEntry>> {
  const prefix = `${keys.ledgerPrefix(campaignId)}step-`;
  const highest =
    (await highestByHead(store, (n) => keys.ledgerEntry(campaignId, n))) ??
    (await highestNumbered(store, prefix, (n) => `${prefix}${pad(n)}.json~`));
  const top = Math.min(highest, opts.atOrBelow ?? highest);
  const numbers = Array.from({ length: Math.max(0, Math.min(opts.limit, top + 1)) }, (_, i) => top - i);
  const items = await readNumbered(
    store,
    numbers,
    (n) => keys.ledgerEntry(campaignId, n),
    (k) => store.getJson(k, LedgerEntrySchema),
    'ledger entry'
  );
  // Step numbers start at 1 (or wherever a campaign began): a missing number is a gap, not a problem.
  return { items: items.filter((i) => !i.missing), highest };
}

/** The `limit` newest checkpoint versions (manifests), newest first; a missing manifest is reported. */
export async function readCheckpointPage(
  store: ObjectStore,
  campaignId: string,
  opts: { limit: number }
): Promise<NewestPage<CheckpointManifest>> {
  const prefix = `${keys.checkpointPrefix(campaignId)}v`;
  const highest =
    (await highestByHead(store, (n) => keys.checkpointManifest(campaignId, n))) ??
    (await highestNumbered(store, prefix, (n) => `${prefix}${pad(n)}/~`));
  const numbers = Array.from({ length: Math.max(0, Math.min(opts.limit, highest + 1)) }, (_, i) => highest - i);
  const items = await readNumbered(
    store,
    numbers,
    (n) => keys.checkpointManifest(campaignId, n),
    (k) => store.getJson(k, CheckpointManifestSchema),
    'checkpoint manifest'
  );
  return { items, highest };
}
