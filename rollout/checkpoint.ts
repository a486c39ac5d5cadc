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
import { asFloat32 } from '../storage/safetensors';
import { paramTensorSpec, specKey, type PolicySpec } from '../policy/spec';
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
}

/** Reads and fully validates one checkpoint version. Storage outages propagate unchanged (retryable). */
export async function readCheckpoint(
  store: ObjectStore,
  spec: PolicySpec,
  campaignId: string,
  version: number
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
  const want = policySpecHash(spec);
  if (manifest.specHash !== want) {
    throw reject(
      'mismatch',
      `checkpoint spec hash ${manifest.specHash} ≠ this server's ${want} (another architecture: a campaign with policy.width ≠ 1, policy.clickMaxContext or policy.clickWordQuery needs its network in the server's --spec-file / DARTFLOW_POLICY_SPEC_FILE; npm start writes it)`
    );
  }
  let decoded;
  try {
    decoded = await store.getSafetensors(manifest.weights.key, {
      expected: paramTensorSpec(spec),
      sha256: manifest.weights.sha256,
    });
  } catch (err) {
    if (err instanceof ObjectNotFoundError)
      throw reject('not_found', `weights object ${manifest.weights.key} is missing`);
    if (err instanceof CorruptObjectError) {
      // getSafetensors reports a shape/name mismatch as corruption too; name it for what it is.
      throw reject(err.reason.startsWith('mismatch:') ? 'mismatch' : 'corrupt', err.message);
    }
    throw err;
  }
  if (decoded.metadata.spec !== undefined && decoded.metadata.spec !== specKey(spec)) {
    throw reject(
      'mismatch',
      `weights were written for spec ${decoded.metadata.spec}, this server runs ${specKey(spec)}`
    );
  }
  const weights: PolicyWeights = {};
  try {
    for (const [name, t] of Object.entries(decoded.tensors)) weights[name] = asFloat32(t, name);
    checkWeights(spec, weights, manifest.weights.key);
  } catch (err) {
    throw reject('corrupt', (err as Error).message);
  }
  return { manifest, weights };
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
