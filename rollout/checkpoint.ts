/**
 * Checkpoints as the policy server sees them: read a version from MinIO and validate it completely
 * (manifest schema, campaign/version, spec hash, weights sha256, tensor names/dtypes/shapes, finite
 * values) before anything is swapped in; and write version 0 (seeded initial weights) for a new campaign.
 *
 * A refused checkpoint raises CheckpointRejectedError, which reloadPolicy turns into a non-retryable
 * Temporal failure: retrying cannot fix bytes that are already wrong in the store.
 */
import { createHash } from 'node:crypto';
import { CheckpointManifestSchema, type CheckpointManifest } from '../schemas/records';
import { CorruptObjectError, ObjectNotFoundError } from '../storage/errors';
import { keys } from '../storage/keys';
import type { ObjectStore } from '../storage/object-store';
import { asFloat32, checkTensorSpec } from '../storage/safetensors';
import { paramTensorSpec, specKey, validateSpec, type PolicySpec } from '../policy/spec';
import { checkWeights, initWeights, weightsToSafetensors, type PolicyWeights } from '../policy/weights';

/**
 * Hash of the architecture spec recorded in every checkpoint manifest: sha256 of the canonical spec
 * JSON (policy/spec.specKey), first 16 hex digits — short enough for object keys, long enough to never
 * collide between the handful of specs a deployment uses.
 */
export function policySpecHash(spec: PolicySpec): string {
  return createHash('sha256').update(specKey(spec)).digest('hex').slice(0, 16);
}

export type CheckpointRejectReason = 'not_found' | 'corrupt' | 'mismatch';

export class CheckpointRejectedError extends Error {
  constructor(
    readonly reason: CheckpointRejectReason,
    readonly campaignId: string,
    readonly version: number,
    detail: string
  ) {
    super(`checkpoint ${campaignId} v${version} refused (${reason}): ${detail}`);
    this.name = 'CheckpointRejectedError';
  }
}

export interface LoadedCheckpoint {
  manifest: CheckpointManifest;
  weights: PolicyWeights;
  /** The network the weights belong to (named by the checkpoint; see readCheckpoint). */
  spec: PolicySpec;
}

/** Which networks a server accepts from checkpoints. */
export interface CheckpointNetwork {
  /** The server's configured network: assumed for checkpoints that do not name theirs. */
  spec: PolicySpec;
  /** Refuse checkpoints of any other network (a server started with --spec-file). */
  pinned: boolean;
}

/**
 * Reads and fully validates one checkpoint version. The checkpoint names its network: the spec in the
 * weights' safetensors header (written by weightsToSafetensors), checked against the spec hash in the
 * manifest, then every tensor against that spec — so a server serves whatever architecture the campaign
 * trains. Checkpoints without the header field take the server's configured spec. Storage outages
 * propagate unchanged (retryable).
 */
export async function readCheckpoint(
  store: ObjectStore,
  campaignId: string,
  version: number,
  network: CheckpointNetwork
): Promise<LoadedCheckpoint> {
  const reject = (reason: CheckpointRejectReason, detail: string) =>
    new CheckpointRejectedError(reason, campaignId, version, detail);
  const manifestKey = keys.checkpointManifest(campaignId, version);
  let manifest: CheckpointManifest;
  try {
    manifest = await store.getJson(manifestKey, CheckpointManifestSchema);
  } catch (err) {
    if (err instanceof ObjectNotFoundError) throw reject('not_found', `no manifest at ${manifestKey}`);
    if (err instanceof CorruptObjectError) throw reject('corrupt', err.message);
    throw err;
  }
  if (manifest.campaignId !== campaignId || manifest.version !== version) {
    throw reject('mismatch', `manifest at ${manifestKey} describes ${manifest.campaignId} v${manifest.version}`);
  }
  const configured = policySpecHash(network.spec);
  // Refused before the weights are fetched: the manifest alone says which network they are for.
  if (network.pinned && manifest.specHash !== configured) {
    throw reject(
      'mismatch',
      `checkpoint spec hash ${manifest.specHash} ≠ ${configured}, the network this server is pinned to by its --spec-file / DARTFLOW_POLICY_SPEC_FILE (start it without one to serve the network each checkpoint names, or with this campaign's spec)`
    );
  }
  let decoded;
  try {
    decoded = await store.getSafetensors(manifest.weights.key, { sha256: manifest.weights.sha256 });
  } catch (err) {
    if (err instanceof ObjectNotFoundError)
      throw reject('not_found', `weights object ${manifest.weights.key} is missing`);
    if (err instanceof CorruptObjectError) throw reject('corrupt', err.message);
    throw err;
  }
  const spec = checkpointSpec(decoded.metadata.spec, network.spec, (detail) => reject('corrupt', detail));
  const named = policySpecHash(spec);
  if (manifest.specHash !== named) {
    throw reject(
      'mismatch',
      decoded.metadata.spec === undefined
        ? `checkpoint spec hash ${manifest.specHash} ≠ this server's ${named} (the weights do not name their network; serve them from a server started with that network's --spec-file)`
        : `the weights' header names network ${named}, but the manifest says spec hash ${manifest.specHash}`
    );
  }
  try {
    checkTensorSpec(decoded.tensors, paramTensorSpec(spec), manifest.weights.key);
  } catch (err) {
    throw reject('mismatch', (err as Error).message);
  }
  const weights: PolicyWeights = {};
  try {
    for (const [name, t] of Object.entries(decoded.tensors)) weights[name] = asFloat32(t, name);
    checkWeights(spec, weights, manifest.weights.key);
  } catch (err) {
    throw reject('corrupt', (err as Error).message);
  }
  return { manifest, weights, spec };
}

/** The spec a weights header names (canonical JSON, policy/spec.specKey), or `fallback` when it names none. */
function checkpointSpec(
  named: string | undefined,
  fallback: PolicySpec,
  corrupt: (detail: string) => Error
): PolicySpec {
  if (named === undefined) return fallback;
  try {
    return validateSpec(JSON.parse(named));
  } catch (err) {
    throw corrupt(`the weights' header field "spec" is not a valid policy spec: ${(err as Error).message}`);
  }
}

/**
 * Writes a checkpoint version (weights, then the manifest that makes it visible). The manifest goes
 * last so a reader never sees a manifest whose weights are not durable yet.
 */
export async function writeCheckpoint(
  store: ObjectStore,
  campaignId: string,
  version: number,
  spec: PolicySpec,
  weights: PolicyWeights,
  extra: { parentVersion?: number | null; metrics?: Record<string, number>; ledgerKey?: string } = {}
): Promise<CheckpointManifest> {
  const ref = await store.putBytes(
    keys.checkpointWeights(campaignId, version),
    weightsToSafetensors(spec, weights, { campaignId, version: String(version) })
  );
  const manifest: CheckpointManifest = {
    schemaVersion: 1,
    campaignId,
    version,
    parentVersion: extra.parentVersion ?? (version > 0 ? version - 1 : null),
    specHash: policySpecHash(spec),
    weights: ref,
    ...(extra.ledgerKey ? { ledgerKey: extra.ledgerKey } : {}),
    metrics: extra.metrics ?? {},
    createdAt: Date.now(),
  };
  await store.putJson(keys.checkpointManifest(campaignId, version), manifest, CheckpointManifestSchema);
  return manifest;
}

/**
 * Version 0 of a campaign: weights initialized from `seed`. Idempotent: if v0 already exists for this
 * spec it is returned untouched (a retried campaign start must not replace the weights rollouts already
 * used); an existing v0 for another spec is an error.
 */
export async function writeInitialCheckpoint(
  store: ObjectStore,
  campaignId: string,
  spec: PolicySpec,
  seed: number
): Promise<CheckpointManifest> {
  const key = keys.checkpointManifest(campaignId, 0);
  if (await store.exists(key)) {
    const existing = await store.getJson(key, CheckpointManifestSchema);
    if (existing.specHash !== policySpecHash(spec)) {
      throw new CheckpointRejectedError(
        'mismatch',
        campaignId,
        0,
        `v0 exists with spec hash ${existing.specHash}, not ${policySpecHash(spec)}`
      );
    }
    return existing;
  }
  return writeCheckpoint(store, campaignId, 0, spec, initWeights(spec, seed), {
    parentVersion: null,
    metrics: { initSeed: seed },
  });
}

/** Highest version with a manifest (a restarted server can resume from it); undefined if none. */
export async function latestCheckpointVersion(store: ObjectStore, campaignId: string): Promise<number | undefined> {
  const names = await store.list(keys.checkpointPrefix(campaignId));
  let best: number | undefined;
  for (const k of names) {
    const m = /\/v(\d+)\/manifest\.json$/.exec(k);
    if (m) best = Math.max(best ?? -1, Number(m[1]));
  }
  return best;
}
