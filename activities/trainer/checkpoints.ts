/**
 * Checkpoints in MinIO: weights + optimizer state (safetensors) + a manifest (version, parent, sha256,
 * spec hash, metrics). Versions form one chain through parentVersion. Reads verify the manifest's sha256
 * and the spec's tensor shapes, so a corrupt or mismatched checkpoint is refused with its key.
 */
import { adamStateFromTensors, adamStateToTensors, createAdamState, type AdamState } from '../../algorithms';
import { paramTensorSpec, type PolicySpec } from '../../policy/spec';
import { policySpecHash } from '../../rollout/checkpoint';
import { initWeights, type PolicyWeights } from '../../policy/weights';
import { CheckpointManifestSchema, type CheckpointManifest } from '../../schemas/records';
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

export async function writeCheckpoint(
  store: ObjectStore,
  args: {
    campaignId: string;
    version: number;
    parentVersion: number | null;
    spec: PolicySpec;
    weights: PolicyWeights;
    optimizer?: AdamState;
    ledgerKey?: string;
    metrics?: Record<string, number>;
  }
): Promise<CheckpointManifest> {
  const { campaignId, version } = args;
  const weightsRef = await store.putSafetensors(
    keys.checkpointWeights(campaignId, version),
    toTensorMap(args.spec, args.weights),
    {
      format: 'dartflow-policy-weights/1',
      version: String(version),
    }
  );
  let optimizerRef;
  if (args.optimizer) {
    const { step, tensors } = adamStateToTensors(args.optimizer);
    const map: TensorMap = Object.fromEntries(Object.entries(tensors).map(([k, v]) => [k, f32Tensor([v.length], v)]));
    optimizerRef = await store.putSafetensors(keys.checkpointOptimizer(campaignId, version), map, {
      step: String(step),
    });
  }
  // The manifest is written last: its presence is what makes the version exist.
  const manifest: CheckpointManifest = {
    schemaVersion: 1,
    campaignId,
    version,
    parentVersion: args.parentVersion,
    specHash: policySpecHash(args.spec),
    weights: weightsRef,
    ...(optimizerRef ? { optimizerState: optimizerRef } : {}),
    ...(args.ledgerKey ? { ledgerKey: args.ledgerKey } : {}),
    metrics: Object.fromEntries(Object.entries(args.metrics ?? {}).filter(([, v]) => Number.isFinite(v))),
    createdAt: Date.now(),
  };
  await store.putJson(keys.checkpointManifest(campaignId, version), manifest, CheckpointManifestSchema);
  return manifest;
}

/** All checkpoint manifests of a campaign, by version. */
export async function listCheckpoints(store: ObjectStore, campaignId: string): Promise<CheckpointManifest[]> {
  const manifests = (await store.list(keys.checkpointPrefix(campaignId))).filter((k) => k.endsWith('/manifest.json'));
  const out: CheckpointManifest[] = [];
  for (const key of manifests) out.push(await store.getJson(key, CheckpointManifestSchema));
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
