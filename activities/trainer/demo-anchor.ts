/**
 * The demonstration anchor of RL steps (trainer.demoAnchorCoef, issue 14.4): every minibatch update (the
 * ones that train: a minibatch with no selected step is skipped, as without the anchor) also
 * minimises coef × mean −log π(a_demo|s) over demoAnchorSamples steps drawn from the demonstrations the KL
 * reference was cloned from — InstructGPT's "PPO-ptx" mix, with the SFT data as the anchor. DART's loss has
 * no such term (its 7B model moves at 1e-6 per step). The 26k-parameter embedded CNN at RL rates of 1e-3
 * shares all its weights between families, and a family whose groups all succeed gives no gradient (zero
 * advantage, skipped), so nothing holds it while the others train: measured on the whole suite from a strong
 * cloning start, families at 97–100 % fell to 56–59 % within 20 minutes of RL (docs/benchmarks.md). The KL
 * term cannot hold them either: it is computed on the batch's states, which come from the other families.
 *
 * The demos are found through the reference checkpoint: its manifest names the ledger entry of the
 * behaviourClone step that produced it, whose `consumed` list is the demonstrations. So the workflow's
 * trainStep input is unchanged, and a campaign without a cloning start is refused with the fix named.
 */
import { LedgerEntrySchema } from '../../schemas/records';
import { createPrng } from '../../algorithms/prng';
import type { PolicySpec } from '../../policy/spec';
import { specKey } from '../../policy/spec';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import type { ObjectStore } from '../../storage/object-store';
import { readManifest } from './checkpoints';
import { loadTrainSamples, type LoadProgress, type StepSample } from './samples';
import type { TrainGroupRef } from './types';

/**
 * At most this many demonstration trajectories are loaded as the anchor (a deterministic subset): on the
 * suite ≈ 3.4 steps each, 48 KiB of decoded observation per step — ≈ 80 MiB per campaign in the trainer
 * (more for tasks with longer demonstrations).
 */
export const ANCHOR_TRAJECTORIES = 512;

/** The reference is not a behaviour-cloning checkpoint, so there are no demonstrations to anchor to. */
export class DemoAnchorUnavailableError extends Error {
  constructor(campaignId: string, referenceVersion: number, why: string) {
    super(
      `trainer.demoAnchorCoef > 0 needs the KL reference to be a behaviour-cloned checkpoint, but v${referenceVersion} of campaign ${campaignId} ${why}: set policy.bcWarmStartEpisodes > 0 or trainer.demoAnchorCoef: 0`
    );
    this.name = 'DemoAnchorUnavailableError';
  }
}

/** The demonstrations behaviour cloning trained `referenceVersion` on, as train-group refs (one per demo group). */
export async function cloningDemos(
  store: ObjectStore,
  campaignId: string,
  referenceVersion: number
): Promise<TrainGroupRef[]> {
  const manifest = await readManifest(store, campaignId, referenceVersion);
  if (!manifest.ledgerKey)
    throw new DemoAnchorUnavailableError(
      campaignId,
      referenceVersion,
      "is the initial model (or a copy of another campaign's checkpoint, which carries no ledger entry)"
    );
  let entry;
  try {
    entry = await store.getJson(manifest.ledgerKey, LedgerEntrySchema);
  } catch (err) {
    // A retry cannot bring a deleted or damaged ledger entry back.
    if (err instanceof ObjectNotFoundError || err instanceof CorruptObjectError)
      throw new DemoAnchorUnavailableError(
        campaignId,
        referenceVersion,
        `has an unusable ledger entry (${err.message})`
      );
    throw err;
  }
  if (entry.metrics.bcLoss === undefined)
    throw new DemoAnchorUnavailableError(campaignId, referenceVersion, `was trained by RL step ${entry.trainStep}`);
  const groups = new Map<string, TrainGroupRef>();
  for (const c of entry.consumed) {
    const g = groups.get(c.groupId) ?? { groupId: c.groupId, taskId: '', trajectories: [] };
    g.trajectories.push({
      trajectoryId: c.trajectoryId,
      manifestKey: c.manifestKey,
      reward: c.reward,
      injectedFromPool: false,
    });
    groups.set(c.groupId, g);
  }
  return [...groups.values()];
}

/**
 * A deterministic subset of at most `max` trajectories, drawn uniformly over all the demos (families are
 * cloned round-robin, so they are represented alike): each trajectory is ranked by the first draw of a PRNG
 * seeded with (salt, its id) — FNV-1a alone barely mixes ids that differ in one character — and the lowest
 * ranks are kept, so the subset does not depend on the
 * order the ledger lists them in. Each kept trajectory is its own group (anchor rows need no group).
 */
export function anchorSubset(groups: readonly TrainGroupRef[], max: number, salt: string): TrainGroupRef[] {
  const all = groups.flatMap((g) =>
    g.trajectories.map((t) => ({ g, t, rank: createPrng(`${salt}/${t.trajectoryId}`).next() }))
  );
  all.sort((a, b) => a.rank - b.rank || (a.t.trajectoryId < b.t.trajectoryId ? -1 : 1));
  return all.slice(0, max).map(({ g, t }) => ({ groupId: g.groupId, taskId: g.taskId, trajectories: [t] }));
}

/** `count` distinct indices into `n` rows (all of them when n ≤ count), drawn with `nextInt`. */
export function drawAnchorRows(n: number, count: number, nextInt: (k: number) => number): number[] {
  if (n <= count) return Array.from({ length: n }, (_, i) => i);
  const picked = new Set<number>();
  while (picked.size < count) picked.add(nextInt(n));
  return [...picked];
}

// The trainer worker runs one campaign's steps one after another: its anchor is loaded once, not per step.
const cache = new Map<string, Promise<AnchorRows>>();
const CACHE_ENTRIES = 2;

export interface AnchorRows {
  samples: StepSample[];
  /** Demo groups (trajectories) left out because an object of theirs is gone or corrupt. */
  skippedGroups: number;
}

/**
 * The anchor rows of a campaign's reference version, loaded once per trainer process and cached under the
 * reference's weights hash (a campaign id deleted and reused gets its own entry). Refused when no demo step
 * is left to anchor to: a silent plain-RL step would hide that the setting does nothing.
 */
export async function loadDemoAnchor(
  store: ObjectStore,
  spec: PolicySpec,
  campaignId: string,
  referenceVersion: number,
  onProgress?: (p: LoadProgress) => void
): Promise<AnchorRows> {
  const manifest = await readManifest(store, campaignId, referenceVersion);
  const key = `${campaignId}/${referenceVersion}/${manifest.weights.sha256}/${specKey(spec)}`;
  const hit = cache.get(key);
  if (hit) {
    // Most recently used last: eviction takes the oldest.
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const loading = (async (): Promise<AnchorRows> => {
    const demos = await cloningDemos(store, campaignId, referenceVersion);
    const subset = anchorSubset(demos, ANCHOR_TRAJECTORIES, `${campaignId}/${referenceVersion}`);
    // Demonstrations are mapped onto the policy's action grid, like behaviour cloning reads them.
    const loaded = await loadTrainSamples(store, spec, subset, {
      usePolicyIndex: false,
      ...(onProgress ? { onProgress } : {}),
    });
    if (loaded.samples.length === 0)
      throw new DemoAnchorUnavailableError(
        campaignId,
        referenceVersion,
        `was cloned from demonstrations of which none is usable now (${loaded.skippedGroups.length} of ${subset.length} gone or corrupt, the rest without a step the policy can express)`
      );
    return { samples: loaded.samples, skippedGroups: loaded.skippedGroups.length };
  })();
  cache.set(key, loading);
  // A failed load is not kept (the next attempt reads again) — unless a newer load took the key meanwhile.
  loading.catch(() => {
    if (cache.get(key) === loading) cache.delete(key);
  });
  while (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return loading;
}
