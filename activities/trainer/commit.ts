/**
 * Commits a train step exactly once, even while two attempts of it are alive at the same time (a worker
 * presumed dead after a heartbeat timeout keeps running while Temporal's retry trains on another one).
 *
 * 1. The version. The manifests above the step's parent are listed once (an attempt of this step can only
 *    have claimed one of those): one that already carries this step's ledgerKey is the step's checkpoint
 *    (written by an earlier or concurrent attempt) and is adopted. Otherwise the attempt claims max + 1
 *    with a conditional manifest PUT (its weights sit under attempt-unique keys until then); a refused
 *    claim lists again and decides again. So one step never gets two children of its
 *    parent, and one version number never names two sets of weights.
 * 2. The commit record: the ledger entry, written with a conditional PUT. The attempt whose PUT is refused
 *    returns the entry that won (same version, same checkpoint).
 *
 * The per-sample record (advantage, selection, IS weight per trained step sample) is written by every
 * attempt before it claims a version, under a key tagged like its checkpoint objects. The ledger entry
 * names (key + sha256) the record of the attempt whose checkpoint it commits, whichever attempt writes the
 * entry; an attempt whose record the committed entry does not name removes it. So the record a ledger
 * entry names always describes the training that produced its checkpoint and metrics.
 */
import { randomBytes } from 'node:crypto';
import type { AdamState } from '../../algorithms';
import type { PolicySpec } from '../../policy/spec';
import type { PolicyWeights } from '../../policy/weights';
import {
  LedgerEntrySchema,
  TrainSampleRecordSchema,
  type CheckpointManifest,
  type LedgerEntry,
  type TrainSampleRecord,
} from '../../schemas/records';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import { keys } from '../../storage/keys';
import { sha256Hex, type ObjectStore } from '../../storage/object-store';
import { claimCheckpointVersion, listCheckpointsAbove, removeCheckpoint } from './checkpoints';
import type { SkippedGroup } from './samples';
import type { TrainGroupRef, TrainStepResult } from './types';

/** Rounds of "list, then claim max + 1" before giving up (each lost round means another version landed). */
const MAX_VERSION_CLAIMS = 8;

/** A version claim kept losing: other writers are adding versions faster than this step can commit. */
export class VersionClaimError extends Error {
  constructor(campaignId: string, trainStep: number) {
    super(
      `train step ${trainStep} of campaign ${campaignId}: lost the claim for a new checkpoint version ` +
        `${MAX_VERSION_CLAIMS} times in a row; is another process writing checkpoints of this campaign?`
    );
    this.name = 'VersionClaimError';
  }
}

export interface StepOutcome {
  campaignId: string;
  trainStep: number;
  fromVersion: number;
  spec: PolicySpec;
  weights: PolicyWeights;
  optimizer: AdamState;
  metrics: Record<string, number>;
  groups: readonly TrainGroupRef[];
  /** trajectoryId → oldest step version (the ledger's staleness). */
  minVersions: Record<string, number>;
  /** Staleness of a version relative to the step's head (along the lineage); default fromVersion − v. */
  staleness?: (version: number) => number;
  /** Groups left out because their objects are gone or corrupt: recorded, never counted as consumed. */
  skipped?: readonly SkippedGroup[];
  isWeight: LedgerEntry['isWeight'];
  /** One row per trained step sample (written before the version claim); absent for behaviour cloning. */
  samples?: readonly TrainSampleRecord[];
  /** When the step started (ledger: trainer utilization). */
  startedAt?: number;
}

function resultOf(entry: LedgerEntry, ledgerKey: string, reused: boolean): TrainStepResult {
  return {
    version: entry.toVersion,
    manifestKey: keys.checkpointManifest(entry.campaignId, entry.toVersion),
    ledgerKey,
    metrics: entry.metrics,
    reused,
  };
}

/** The step's result if its commit record exists already (an earlier attempt committed it). */
async function readCommitted(
  store: ObjectStore,
  campaignId: string,
  trainStep: number
): Promise<TrainStepResult | undefined> {
  const ledgerKey = keys.ledgerEntry(campaignId, trainStep);
  if (!(await store.exists(ledgerKey))) return undefined;
  return resultOf(await store.getJson(ledgerKey, LedgerEntrySchema), ledgerKey, true);
}

/**
 * Before training: the step's result if an earlier attempt committed it. Otherwise the manifests the
 * commit will list (those above the step's parent `fromVersion`) are read once now, so a damaged one
 * refuses the step before the training work rather than after it.
 */
export async function committedOrChainReadable(
  store: ObjectStore,
  campaignId: string,
  trainStep: number,
  fromVersion: number
): Promise<TrainStepResult | undefined> {
  const committed = await readCommitted(store, campaignId, trainStep);
  if (committed) return committed;
  await listCheckpointsAbove(store, campaignId, fromVersion);
  return undefined;
}

/** This step's checkpoint: the one an attempt already wrote, or a newly claimed max + 1. */
async function settleVersion(
  store: ObjectStore,
  o: StepOutcome,
  ledgerKey: string,
  attempt: string
): Promise<{ manifest: CheckpointManifest; claimedHere: boolean }> {
  for (let round = 0; round < MAX_VERSION_CLAIMS; round++) {
    const above = await listCheckpointsAbove(store, o.campaignId, o.fromVersion);
    const written = above.find((m) => m.ledgerKey === ledgerKey);
    if (written) return { manifest: written, claimedHere: false };
    const claim = await claimCheckpointVersion(
      store,
      {
        campaignId: o.campaignId,
        // The parent exists (the step read it), so with nothing above it the newest version is the parent.
        version: (above.at(-1)?.version ?? o.fromVersion) + 1,
        parentVersion: o.fromVersion,
        spec: o.spec,
        weights: o.weights,
        optimizer: o.optimizer,
        ledgerKey,
        metrics: o.metrics,
      },
      attempt
    );
    if (claim.claimed) return { manifest: claim.manifest, claimedHere: true };
  }
  throw new VersionClaimError(o.campaignId, o.trainStep);
}

type SamplesRef = NonNullable<LedgerEntry['samples']>;

/** The attempt tag of a checkpoint claimed by a train step (`weights.<attempt>.safetensors`), if any. */
export function checkpointAttempt(checkpoint: CheckpointManifest): string | undefined {
  return /\/weights\.([A-Za-z0-9-]{1,64})\.safetensors$/.exec(checkpoint.weights.key)?.[1];
}

/**
 * The per-sample record of the attempt that trained `checkpoint`: this attempt's own, or (adopting another
 * attempt's checkpoint) the one that attempt wrote before its claim. Undefined when there is none (a
 * checkpoint written without an attempt tag, or by a trainer that writes no record).
 */
async function samplesOfCheckpoint(
  store: ObjectStore,
  o: StepOutcome,
  checkpoint: CheckpointManifest,
  attempt: string,
  own: SamplesRef | undefined
): Promise<SamplesRef | undefined> {
  const tag = checkpointAttempt(checkpoint);
  if (!tag) return undefined;
  if (tag === attempt) return own;
  const key = keys.trainSamples(o.campaignId, o.trainStep, tag);
  try {
    const bytes = await store.getBytes(key);
    const text = bytes.toString('utf8');
    return {
      bucket: store.bucket,
      key,
      sha256: sha256Hex(bytes),
      bytes: bytes.length,
      rows: text.length === 0 ? 0 : text.split('\n').length,
    };
  } catch (err) {
    // Gone or damaged: the entry is committed without a record rather than the step failing on it.
    if (err instanceof ObjectNotFoundError || err instanceof CorruptObjectError) return undefined;
    throw err;
  }
}

function ledgerEntryFor(o: StepOutcome, checkpoint: CheckpointManifest, samples?: SamplesRef): LedgerEntry {
  const skippedIds = new Set(o.skipped?.map((k) => k.groupId));
  return {
    schemaVersion: 1,
    campaignId: o.campaignId,
    trainStep: o.trainStep,
    fromVersion: o.fromVersion,
    toVersion: checkpoint.version,
    consumed: o.groups
      .filter((g) => !skippedIds.has(g.groupId))
      .flatMap((g) =>
        g.trajectories.map((t) => ({
          trajectoryId: t.trajectoryId,
          manifestKey: t.manifestKey,
          groupId: g.groupId,
          reward: t.reward,
          staleness: (o.staleness ?? ((v: number) => Math.max(0, o.fromVersion - v)))(
            o.minVersions[t.trajectoryId] ?? o.fromVersion
          ),
          injectedFromPool: t.injectedFromPool,
        }))
      ),
    ...(o.skipped?.length ? { skipped: o.skipped.map((k) => ({ ...k })) } : {}),
    isWeight: o.isWeight,
    ...(samples ? { samples } : {}),
    // The checkpoint's metrics, not this attempt's: an attempt that adopts another's checkpoint reports
    // what that checkpoint was trained with.
    metrics: checkpoint.metrics,
    ...(o.startedAt !== undefined ? { startedAt: o.startedAt } : {}),
    createdAt: Date.now(),
  };
}

/** Writes the step's checkpoint and ledger entry once; every attempt returns the one committed result. */
export async function commitTrainStep(store: ObjectStore, o: StepOutcome): Promise<TrainStepResult> {
  const committed = await readCommitted(store, o.campaignId, o.trainStep);
  if (committed) return committed;
  const ledgerKey = keys.ledgerEntry(o.campaignId, o.trainStep);
  const attempt = randomBytes(6).toString('hex');
  // Before the claim: once a manifest names this attempt's weights, its record exists for whoever commits.
  const own: SamplesRef | undefined = o.samples
    ? {
        ...(await store.putJsonLines(
          keys.trainSamples(o.campaignId, o.trainStep, attempt),
          [...o.samples],
          TrainSampleRecordSchema
        )),
        rows: o.samples.length,
      }
    : undefined;
  // An attempt's record the committed entry does not name describes training nobody kept: removed.
  const dropOwnUnless = async (named: SamplesRef | undefined) => {
    if (own && named?.key !== own.key) await store.remove(own.key);
  };
  const { manifest, claimedHere } = await settleVersion(store, o, ledgerKey, attempt);
  const entry = ledgerEntryFor(o, manifest, await samplesOfCheckpoint(store, o, manifest, attempt, own));
  if ((await store.putJsonIfAbsent(ledgerKey, entry, LedgerEntrySchema)).written) {
    await dropOwnUnless(entry.samples);
    return resultOf(entry, ledgerKey, !claimedHere);
  }
  // Another attempt wrote the entry first. If it points at the version claimed here (it adopted this
  // attempt's checkpoint), this attempt's training still produced the result: not reused.
  const winner = await store.getJson(ledgerKey, LedgerEntrySchema);
  const ownCheckpointWon = claimedHere && winner.toVersion === manifest.version;
  // Only reachable when versions have gaps (a manifest deleted by hand): the entry that won points at
  // another checkpoint, so the one claimed here is a divergent child nothing may mistake for the output.
  if (claimedHere && !ownCheckpointWon) await removeCheckpoint(store, manifest);
  await dropOwnUnless(winner.samples);
  return resultOf(winner, ledgerKey, !ownCheckpointWon);
}
