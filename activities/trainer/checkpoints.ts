/**
 * Checkpoints in MinIO: weights + optimizer state (safetensors) + a manifest (version, parent, sha256,
 * spec hash, metrics). Versions form one chain through parentVersion. Reads verify the manifest's sha256
 * and the spec's tensor shapes, so a corrupt or mismatched checkpoint is refused with its key.
 */
import { adamStateFromTensors, adamStateToTensors, createAdamState, type AdamState } from '../../algorithms';
import { paramTensorSpec, type PolicySpec } from '../../policy/spec';
import { policySpecHash } from '../../rollout/checkpoint';
import { initWeights, weightsHeader, type PolicyWeights } from '../../policy/weights';
import { CheckpointManifestSchema, type CheckpointManifest, type ObjectRef } from '../../schemas/records';
import { CorruptObjectError } from '../../storage/errors';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { asFloat32, f32Tensor, type TensorMap } from '../../storage/safetensors';

// The spec hash is the policy server's (a checkpoint only loads into a session of the same shape).
export { policySpecHash };

/** A checkpoint that exists but cannot be used with this spec (wrong shapes or spec hash). */
export class CheckpointMismatchError extends Error {
  constructor(
    readonly key: string,
    reason: string
  ) {
    super(`checkpoint ${key} does not match the policy spec: ${reason}`);
    this.name = 'CheckpointMismatchError';
  }
}

export interface LoadedCheckpoint {
  manifest: CheckpointManifest;
  weights: PolicyWeights;
  optimizer?: AdamState;
}

function toTensorMap(spec: PolicySpec, weights: PolicyWeights): TensorMap {
  const shapes = paramTensorSpec(spec);
  return Object.fromEntries(Object.entries(shapes).map(([name, t]) => [name, f32Tensor(t.shape, weights[name]!)]));
}

export async function readManifest(
  store: ObjectStore,
  campaignId: string,
  version: number
): Promise<CheckpointManifest> {
  return store.getJson(keys.checkpointManifest(campaignId, version), CheckpointManifestSchema);
}

export async function loadCheckpoint(
  store: ObjectStore,
  campaignId: string,
  version: number,
  spec: PolicySpec
): Promise<LoadedCheckpoint> {
  const manifest = await readManifest(store, campaignId, version);
  const hash = policySpecHash(spec);
  if (manifest.specHash !== hash) {
    throw new CheckpointMismatchError(
      keys.checkpointManifest(campaignId, version),
      `spec hash ${manifest.specHash} ≠ ${hash}`
    );
  }
  const decoded = await store.getSafetensors(manifest.weights.key, {
    expected: paramTensorSpec(spec),
    sha256: manifest.weights.sha256,
  });
  const weights: PolicyWeights = Object.fromEntries(
    Object.entries(decoded.tensors).map(([k, t]) => [k, asFloat32(t, k)])
  );
  for (const [name, w] of Object.entries(weights)) {
    if (!w.every(Number.isFinite))
      throw new CorruptObjectError(manifest.weights.key, `tensor ${name} holds NaN or infinity`);
  }
  let optimizer: AdamState | undefined;
  if (manifest.optimizerState) {
    const opt = await store.getSafetensors(manifest.optimizerState.key, { sha256: manifest.optimizerState.sha256 });
    const tensors = Object.fromEntries(Object.entries(opt.tensors).map(([k, t]) => [k, asFloat32(t, k)]));
    try {
      optimizer = adamStateFromTensors(Number(opt.metadata.step ?? 0), tensors, weights);
    } catch (err) {
      throw new CheckpointMismatchError(manifest.optimizerState.key, (err as Error).message);
    }
  }
  return { manifest, weights, optimizer };
}

interface CheckpointContent {
  campaignId: string;
  version: number;
  parentVersion: number | null;
  spec: PolicySpec;
  weights: PolicyWeights;
  optimizer?: AdamState;
  ledgerKey?: string;
  metrics?: Record<string, number>;
}

/**
 * Where one attempt puts a version's weights/optimizer before it owns the version: `weights.<attempt>.
 * safetensors` next to the canonical `weights.safetensors`. Two live attempts racing for one version then
 * never overwrite each other's bytes, and only the manifest that wins points at its attempt's objects.
 */
export function attemptObjectKey(canonicalKey: string, attempt: string): string {
  if (!/^[A-Za-z0-9-]{1,64}$/.test(attempt))
    throw new Error(`attempt tag "${attempt}" must be 1-64 letters, digits or dashes`);
  return canonicalKey.replace(/\.safetensors$/, `.${attempt}.safetensors`);
}

/** Weights and optimizer objects of a version (the manifest comes after, and refers to them). */
async function writeCheckpointObjects(
  store: ObjectStore,
  args: CheckpointContent,
  attempt?: string
): Promise<{ weights: ObjectRef; optimizerState?: ObjectRef }> {
  const { campaignId, version } = args;
  const at = (key: string) => (attempt ? attemptObjectKey(key, attempt) : key);
  const weights = await store.putSafetensors(
    at(keys.checkpointWeights(campaignId, version)),
    toTensorMap(args.spec, args.weights),
    weightsHeader(args.spec, { campaignId, version: String(version) })
  );
  if (!args.optimizer) return { weights };
  const { step, tensors } = adamStateToTensors(args.optimizer);
  const map: TensorMap = Object.fromEntries(Object.entries(tensors).map(([k, v]) => [k, f32Tensor([v.length], v)]));
  const optimizerState = await store.putSafetensors(at(keys.checkpointOptimizer(campaignId, version)), map, {
    step: String(step),
  });
  return { weights, optimizerState };
}

function manifestFor(
  args: CheckpointContent,
  objects: { weights: ObjectRef; optimizerState?: ObjectRef }
): CheckpointManifest {
  return {
    schemaVersion: 1,
    campaignId: args.campaignId,
    version: args.version,
    parentVersion: args.parentVersion,
    specHash: policySpecHash(args.spec),
    weights: objects.weights,
    ...(objects.optimizerState ? { optimizerState: objects.optimizerState } : {}),
    ...(args.ledgerKey ? { ledgerKey: args.ledgerKey } : {}),
    metrics: Object.fromEntries(Object.entries(args.metrics ?? {}).filter(([, v]) => Number.isFinite(v))),
    createdAt: Date.now(),
  };
}

/** Writes a version unconditionally (initial checkpoint, tests); train steps use claimCheckpointVersion. */
export async function writeCheckpoint(store: ObjectStore, args: CheckpointContent): Promise<CheckpointManifest> {
  const objects = await writeCheckpointObjects(store, args);
  // The manifest is written last: its presence is what makes the version exist.
  const manifest = manifestFor(args, objects);
  await store.putJson(keys.checkpointManifest(args.campaignId, args.version), manifest, CheckpointManifestSchema);
  return manifest;
}

export type VersionClaim =
  { claimed: true; manifest: CheckpointManifest } | { claimed: false; holder: CheckpointManifest };

/**
 * Writes `args.version` only if no manifest holds that version yet: the objects under attempt-unique keys,
 * then the manifest with a conditional PUT, so of two writers exactly one owns the version. The other
 * gets the holder's manifest back and its own objects are removed (nothing points at them), unless the
 * holder is its own write whose answer was lost.
 */
export async function claimCheckpointVersion(
  store: ObjectStore,
  args: CheckpointContent,
  attempt: string
): Promise<VersionClaim> {
  const objects = await writeCheckpointObjects(store, args, attempt);
  const manifest = manifestFor(args, objects);
  const manifestKey = keys.checkpointManifest(args.campaignId, args.version);
  if ((await store.putJsonIfAbsent(manifestKey, manifest, CheckpointManifestSchema)).written)
    return { claimed: true, manifest };
  const holder = await store.getJson(manifestKey, CheckpointManifestSchema);
  if (holder.weights.key === objects.weights.key) return { claimed: true, manifest: holder };
  await store.remove(objects.weights.key);
  if (objects.optimizerState) await store.remove(objects.optimizerState.key);
  return { claimed: false, holder };
}

/** All checkpoint manifests of a campaign, by version. */
export function listCheckpoints(store: ObjectStore, campaignId: string): Promise<CheckpointManifest[]> {
  return listCheckpointsAbove(store, campaignId, -1);
}

/**
 * The manifests of the versions above `version`, by version: all a train step from `version` has to read
 * (a claim is always max + 1 ≥ version + 1, so any checkpoint an attempt of that step wrote is there). The
 * listing starts after `version`'s own keys, so a step's cost does not grow with the campaign's length
 * (reading every manifest made each train step of a 500-version soak ≈ 1,000 GETs slower).
 */
export async function listCheckpointsAbove(
  store: ObjectStore,
  campaignId: string,
  version: number
): Promise<CheckpointManifest[]> {
  const startAfter = version >= 0 ? keys.checkpointManifest(campaignId, version) : undefined;
  const names = await store.list(keys.checkpointPrefix(campaignId), startAfter);
  const out: CheckpointManifest[] = [];
  for (const key of names) {
    const m = /\/v(\d+)\/manifest\.json$/.exec(key);
    if (m && Number(m[1]) > version) out.push(await store.getJson(key, CheckpointManifestSchema));
  }
  return out.sort((a, b) => a.version - b.version);
}

/** Checkpoint v0 from the policy seed, written once (idempotent). Returns its version (0). */
export async function ensureInitialCheckpoint(
  store: ObjectStore,
  campaignId: string,
  spec: PolicySpec,
  seed: number
): Promise<number> {
  if (await store.exists(keys.checkpointManifest(campaignId, 0))) {
    const m = await readManifest(store, campaignId, 0);
    if (m.specHash !== policySpecHash(spec)) {
      throw new CheckpointMismatchError(
        keys.checkpointManifest(campaignId, 0),
        'the campaign was started with another policy architecture; use a new campaign id'
      );
    }
    return 0;
  }
  const weights = initWeights(spec, seed);
  await writeCheckpoint(store, {
    campaignId,
    version: 0,
    parentVersion: null,
    spec,
    weights,
    optimizer: createAdamState(weights),
  });
  return 0;
}

/** Removes a version: the manifest first (so the version stops existing), then the objects it points at. */
export async function removeCheckpoint(store: ObjectStore, manifest: CheckpointManifest): Promise<void> {
  await store.remove(keys.checkpointManifest(manifest.campaignId, manifest.version));
  await store.remove(manifest.weights.key);
  if (manifest.optimizerState) await store.remove(manifest.optimizerState.key);
}
