/**
 * The demonstration anchor of RL steps (trainer.demoAnchorCoef, issue 14.4): every minibatch update also
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
import type { ObjectStore } from '../../storage/object-store';
import { readManifest } from './checkpoints';
import { loadTrainSamples, type LoadProgress, type StepSample } from './samples';
import type { TrainGroupRef } from './types';

/**
 * At most this many demonstration trajectories are loaded as the anchor (a deterministic subset): ≈ 3.4
 * steps each on the suite, 48 KiB of decoded observation per step — ≈ 80 MiB per campaign in the trainer.
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
  if (!manifest.ledgerKey) throw new DemoAnchorUnavailableError(campaignId, referenceVersion, 'is the initial model');
  const entry = await store.getJson(manifest.ledgerKey, LedgerEntrySchema);
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
const cache = new Map<string, Promise<StepSample[]>>();
const CACHE_ENTRIES = 2;

/** The anchor rows of a campaign's reference version (loaded once per trainer process; cached). */
export function loadDemoAnchor(
  store: ObjectStore,
  spec: PolicySpec,
  campaignId: string,
  referenceVersion: number,
  onProgress?: (p: LoadProgress) => void
): Promise<StepSample[]> {
  const key = `${campaignId}/${referenceVersion}/${specKey(spec)}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const loading = (async () => {
    const demos = await cloningDemos(store, campaignId, referenceVersion);
    const subset = anchorSubset(demos, ANCHOR_TRAJECTORIES, `${campaignId}/${referenceVersion}`);
    // Demonstrations are mapped onto the policy's action grid, like behaviour cloning reads them.
    const loaded = await loadTrainSamples(store, spec, subset, {
      usePolicyIndex: false,
      ...(onProgress ? { onProgress } : {}),
    });
    return loaded.samples;
  })();
  cache.set(key, loading);
  // A failed load is not kept: the next attempt of the step reads again.
  loading.catch(() => cache.delete(key));
  while (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return loading;
}
