/**
 * A trajectory's manifest is its commit record, and two attempts of one episode can race to write it: a
 * retry, and the attempt Temporal gave up on (its heartbeat timed out while a policy server or the env
 * was stuck) that still runs and finishes later. Without a rule the later writer wins, so the stored
 * manifest (and, before steps objects were per attempt, its steps) could belong to an attempt whose result
 * Temporal never accepted: the group then reports one reward while the trainer reads another episode's
 * steps, or finds steps whose sha256 does not match and drops the whole group.
 *
 * The rule: an ok manifest, once stored, is final. An attempt that finishes ok and finds one returns that
 * manifest instead of its own, so whichever attempt's completion Temporal accepts reports exactly what is
 * stored. A failure record (reward null) is only a placeholder for debugging: an ok manifest or a later
 * failure record replaces it, conditionally on the ETag read, so a concurrent ok write is never lost.
 */
import { TrajectoryManifestSchema, type TrajectoryManifest } from '../../schemas/records';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import type { ObjectStore } from '../../storage/object-store';

/** Rounds of read-and-conditionally-write before giving up (each lost round means another writer won one). */
const COMMIT_ROUNDS = 8;

export interface ManifestCommit {
  /** What is stored now: `manifest` itself, or the ok manifest another attempt committed first. */
  manifest: TrajectoryManifest;
  /** Whether this call wrote it. */
  written: boolean;
}

/** The stored manifest and its ETag; a damaged one reads as replaceable (status null). */
async function readCurrent(
  store: ObjectStore,
  key: string
): Promise<{ etag: string; manifest: TrajectoryManifest | null } | null> {
  // ETag first, then the body: if another writer lands in between, the body is newer than the ETag and
  // the conditional write below fails, so the next round reads again. Never the other way round.
  const etag = await store.etagOf(key);
  if (etag === null) return null;
  try {
    return { etag, manifest: await store.getJson(key, TrajectoryManifestSchema) };
  } catch (err) {
    if (err instanceof ObjectNotFoundError) return null;
    if (err instanceof CorruptObjectError) return { etag, manifest: null };
    throw err;
  }
}

export async function commitManifest(
  store: ObjectStore,
  key: string,
  manifest: TrajectoryManifest
): Promise<ManifestCommit> {
  // Nearly every commit is the first write of its key: try that before reading (a HEAD less per episode).
  if ((await store.putJsonIfAbsent(key, manifest, TrajectoryManifestSchema)).written)
    return { manifest, written: true };
  for (let round = 1; round <= COMMIT_ROUNDS; round++) {
    const current = await readCurrent(store, key);
    if (current === null) {
      if ((await store.putJsonIfAbsent(key, manifest, TrajectoryManifestSchema)).written)
        return { manifest, written: true };
      continue;
    }
    if (current.manifest?.status === 'ok') return { manifest: current.manifest, written: false };
    if ((await store.putJsonIfMatch(key, manifest, current.etag, TrajectoryManifestSchema)).written)
      return { manifest, written: true };
  }
  throw new Error(
    `manifest ${key}: gave up after ${COMMIT_ROUNDS} rounds of conditional writes (other attempts kept replacing it)`
  );
}
