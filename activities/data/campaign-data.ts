/**
 * Data-manager activities on the orchestrator queue: the experience pool, policy server discovery and
 * campaign preparation. Small, idempotent reads and writes of MinIO objects.
 */
import { z } from 'zod';
import {
  TrajectorySummarySchema,
  type EvalPoint,
  type PolicyEndpoint,
  type TrajectorySummary,
} from '../../schemas/campaign';
import { DiscardRecordSchema } from '../../schemas/discards';
import { TrajectoryManifestSchema } from '../../schemas/records';
import { isSuccess } from '../../algorithms/success';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import { keys, registryKeys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { indexDiscards } from '../../storage/trajectory-index';
import { mapLimit } from '../../lib/concurrency';
import type { DiscardEntry } from '../../workflows/logic/discards';
import { instructionKeyOf } from '../env/instruction-key';

export const PolicyServerRegistrationSchema = z.object({
  serverId: z.string().min(1),
  url: z.url(),
  /** Epoch ms of the last announcement; stale entries (dead servers) are skipped. */
  heartbeatAt: z.number(),
  version: z.number().int().nonnegative().optional(),
  /** Campaign of the served version: a restarted server reloads campaignId@version from here. */
  campaignId: z.string().min(1).optional(),
});
export type PolicyServerRegistration = z.infer<typeof PolicyServerRegistrationSchema>;

const PoolEntrySchema = TrajectorySummarySchema.extend({ pooledAt: z.number() });
/** Pool objects read at once (a lookup that misses its instruction reads the whole task's pool). */
const POOL_READS = 8;
/**
 * Pool entries this process wrote or read, by key (entries are small and a key is rewritten only by a
 * retry of the same add): evicting the oldest and finding the newest need every entry's pooledAt, which
 * was a GET per entry per group (half the pool's MinIO requests at 512 envs). Listings still decide which
 * entries exist, so another process's adds and evictions are seen; only entries it wrote are read.
 */
const POOL_CACHE_MAX = 50_000;
/** Discard records written at once by one recordDiscards. */
const DISCARD_WRITE_CONCURRENCY = 8;

export function createCampaignDataActivities(deps: { store: ObjectStore; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const { store } = deps;
  type PoolEntry = z.infer<typeof PoolEntrySchema>;
  const poolCache = new Map<string, PoolEntry>();
  const remember = (key: string, entry: PoolEntry) => {
    poolCache.delete(key);
    poolCache.set(key, entry);
    if (poolCache.size > POOL_CACHE_MAX) poolCache.delete(poolCache.keys().next().value!);
  };
  /** A pool entry from the cache, or read (and cached); null when unreadable or gone. */
  async function poolEntryOf(key: string): Promise<PoolEntry | null> {
    const cached = poolCache.get(key);
    if (cached) return cached;
    try {
      const entry = await store.getJson(key, PoolEntrySchema);
      remember(key, entry);
      return entry;
    } catch (err) {
      // Gone (evicted by another process since the listing) or damaged: skipped. MinIO down: the activity retries.
      if (err instanceof ObjectNotFoundError || err instanceof CorruptObjectError) return null;
      throw err;
    }
  }
  /** Writes a pool entry (pooledAt = now) and keeps what was stored. */
  async function putPoolEntry(key: string, summary: TrajectorySummary): Promise<void> {
    const entry = PoolEntrySchema.parse({ ...summary, pooledAt: now() });
    await store.putJson(key, entry);
    remember(key, entry);
  }
  async function removePoolEntries(entryKeys: string[]): Promise<void> {
    if (entryKeys.length === 0) return;
    await store.removeMany(entryKeys); // one multi-object DELETE
    for (const key of entryKeys) poolCache.delete(key);
  }

  /** A pool object name's instruction key (`<key>=<trajectoryId>.json`), or '' for an entry without one. */
  const instructionKeyOfName = (key: string): string => /\/([0-9a-f]{16})=[^/]*$/.exec(key)?.[1] ?? '';

  /** Each entry's pooledAt (unreadable entries get −1, so they go first); read POOL_READS at a time. */
  async function pooledAtOf(entryKeys: string[]): Promise<Array<{ key: string; pooledAt: number }>> {
    return mapLimit(entryKeys, POOL_READS, async (key) => ({
      key,
      pooledAt: (await poolEntryOf(key))?.pooledAt ?? -1,
    }));
  }

  /** Removes the oldest of `entryKeys` beyond `keep` (by pooledAt; unreadable entries go first); returns them. */
  async function evictOldest(entryKeys: string[], keep: number): Promise<string[]> {
    if (entryKeys.length <= keep) return [];
    const entries = await pooledAtOf(entryKeys);
    entries.sort((a, b) => b.pooledAt - a.pooledAt || a.key.localeCompare(b.key));
    const removed = entries.slice(Math.max(0, keep)).map((e) => e.key);
    await removePoolEntries(removed);
    return removed;
  }

  /**
   * Brings a task's pool down to `cap` entries, each time taking the oldest entry of the instruction with the
   * most entries: a rare instruction's only success (the one a stuck sub-task needs) outlives the many
   * successes of the instructions already learned.
   */
  async function evictToCap(entryKeys: string[], cap: number): Promise<void> {
    if (entryKeys.length <= cap) return;
    const byInstruction = new Map<string, Array<{ key: string; pooledAt: number }>>();
    for (const e of await pooledAtOf(entryKeys)) {
      const list = byInstruction.get(instructionKeyOfName(e.key)) ?? [];
      list.push(e);
      byInstruction.set(instructionKeyOfName(e.key), list);
    }
    for (const list of byInstruction.values())
      list.sort((a, b) => a.pooledAt - b.pooledAt || a.key.localeCompare(b.key));
    const evicted: string[] = [];
    for (let excess = entryKeys.length - cap; excess > 0; excess--) {
      let largest: Array<{ key: string; pooledAt: number }> | undefined;
      for (const list of byInstruction.values()) {
        if (
          !largest ||
          list.length > largest.length ||
          (list.length === largest.length && list[0]!.pooledAt < largest[0]!.pooledAt)
        )
          largest = list;
      }
      evicted.push(largest!.shift()!.key);
    }
    await removePoolEntries(evicted);
  }

  /** The newest readable entry among `entryKeys`, as a summary. */
  async function newestOf(entryKeys: string[]): Promise<TrajectorySummary | null> {
    let best: PoolEntry | null = null;
    for (const e of await mapLimit(entryKeys, POOL_READS, poolEntryOf)) {
      if (e && (!best || e.pooledAt > best.pooledAt)) best = e;
    }
    if (!best) return null;
    const { pooledAt: _pooledAt, ...summary } = best;
    return summary;
  }

  return {
    /**
     * Adds successful trajectories to their task's pool (idempotent: the key is the trajectory id). With
     * `keepNewest`, each touched task keeps only its newest k entries: DART's pool lookup takes the most
     * recent success of a task, so older ones are evicted rather than newer ones refused. With
     * `perInstruction`, the newest k are kept per (task, instruction) instead, and a task's pool holds at
     * most `perInstruction.maxPerTask` entries (evictToCap: the oldest of the instruction with the most entries
     * go first).
     */
    async addToPool(input: {
      campaignId: string;
      trajectories: TrajectorySummary[];
      keepNewest?: number;
      perInstruction?: { maxPerTask: number };
      /** reward ≥ this is a success (campaign.successThreshold; default 1.0). */
      successThreshold?: number;
    }): Promise<number> {
      let added = 0;
      const touched = new Map<string, Set<string>>(); // taskId → instruction keys touched ('' = none)
      for (const t of input.trajectories) {
        if (!isSuccess(t.reward, input.successThreshold)) continue;
        await putPoolEntry(keys.poolEntry(input.campaignId, t.taskId, t.trajectoryId, t.instructionKey), {
          ...t,
          injectedFromPool: false,
        });
        const set = touched.get(t.taskId) ?? new Set<string>();
        set.add(t.instructionKey ?? '');
        touched.set(t.taskId, set);
        added++;
      }
      if (input.keepNewest === undefined) return added;
      for (const [taskId, instructionKeys] of touched) {
        const all = await store.list(keys.poolPrefix(input.campaignId, taskId));
        if (!input.perInstruction) {
          await evictOldest(all, input.keepNewest);
          continue;
        }
        const removed = new Set<string>();
        for (const ik of instructionKeys) {
          const ofInstruction = all.filter((k) => instructionKeyOfName(k) === ik);
          for (const key of await evictOldest(ofInstruction, input.keepNewest)) removed.add(key);
        }
        await evictToCap(
          all.filter((k) => !removed.has(k)),
          input.perInstruction.maxPerTask
        );
      }
      return added;
    },

    /**
     * The most recent pooled success of a task (DART §3.4 c), or null. With an instruction key, the most
     * recent success of that instruction comes first; the task's most recent is the fallback.
     */
    async findPoolSuccess(input: {
      campaignId: string;
      taskId: string;
      instructionKey?: string;
    }): Promise<TrajectorySummary | null> {
      const entries = await store.list(keys.poolPrefix(input.campaignId, input.taskId));
      if (input.instructionKey) {
        const same = await newestOf(entries.filter((k) => instructionKeyOfName(k) === input.instructionKey));
        if (same) return same;
      }
      return newestOf(entries);
    },

    async poolSizes(input: { campaignId: string }): Promise<Record<string, number>> {
      const out: Record<string, number> = {};
      for (const key of await store.list(keys.poolPrefix(input.campaignId))) {
        const taskId = key.split('/').at(-2);
        if (taskId) out[taskId] = (out[taskId] ?? 0) + 1;
      }
      return out;
    },

    /** An operator-supplied success (or demonstration) joins a task's pool (Update injectSuccess). */
    async injectSuccess(input: { campaignId: string; taskId: string; manifestKey: string }): Promise<void> {
      const m = await store.getJson(input.manifestKey, TrajectoryManifestSchema);
      if (m.taskId !== input.taskId)
        throw new Error(`${input.manifestKey} is a trajectory of task ${m.taskId}, not ${input.taskId}`);
      if (!(m.reward !== null && m.reward > 0))
        throw new Error(`${input.manifestKey} is not a success (reward ${String(m.reward)})`);
      const summary: TrajectorySummary = {
        trajectoryId: m.trajectoryId,
        manifestKey: input.manifestKey,
        taskId: m.taskId,
        groupId: m.groupId,
        reward: m.reward,
        status: m.status,
        numSteps: m.numSteps,
        minPolicyVersion: m.minPolicyVersion,
        maxPolicyVersion: m.maxPolicyVersion,
        injectedFromPool: false,
        ...(m.instruction ? { instructionKey: instructionKeyOf(m.instruction) } : {}),
      };
      await putPoolEntry(keys.poolEntry(input.campaignId, m.taskId, m.trajectoryId, summary.instructionKey), summary);
    },

    /**
     * Why completed trajectories were not trained on: one record per group and event (idempotent: the
     * key is derived from both, so a retried activity rewrites the same object).
     */
    async recordDiscards(input: {
      campaignId: string;
      policyVersion: number;
      trainStep: number;
      /** An entry's own policyVersion/trainStep (the head when the campaign decided) wins over the batch's. */
      entries: DiscardEntry[];
    }): Promise<number> {
      // One object per group and event (a retry rewrites the same keys); written a few at a time, since a
      // campaign that coalesces its writes hands over a burst of entries at once.
      await mapLimit(input.entries, DISCARD_WRITE_CONCURRENCY, (e) =>
        store.putJson(
          keys.discardRecord(input.campaignId, e.groupId, e.event),
          {
            schemaVersion: 1,
            campaignId: input.campaignId,
            groupId: e.groupId,
            taskId: e.taskId,
            event: e.event,
            policyVersion: e.policyVersion ?? input.policyVersion,
            trainStep: e.trainStep ?? input.trainStep,
            trajectories: e.trajectories,
            createdAt: now(),
          },
          DiscardRecordSchema
        )
      );
      await indexDiscards(store, input, now()); // discard reasons over time, for the viewer
      return input.entries.length;
    },

    /**
     * Continue-as-new by reference: a campaign state too large to carry inline is stored here and the
     * next run loads it (the payload stays small; the object is named by campaign and run, so a retried
     * write rewrites the same object).
     */
    async saveCampaignState(input: { campaignId: string; runIndex: number; state: unknown }): Promise<{ key: string }> {
      const key = keys.campaignState(input.campaignId, `run-${String(input.runIndex).padStart(6, '0')}`);
      await store.putJson(key, input.state);
      return { key };
    },

    async loadCampaignState(input: { key: string }): Promise<unknown> {
      return store.getJson(input.key, z.unknown());
    },

    /** Learning-curve point (held-out greedy success of a version). */
    async recordEvalPoint(input: { campaignId: string; point: EvalPoint }): Promise<void> {
      const key = `${keys.evalPrefix(input.campaignId)}v${String(input.point.version).padStart(6, '0')}-${input.point.atMs}.json`;
      await store.putJson(key, input.point);
    },

    /** Live policy servers announced in the registry (announced within `maxAgeMs`). */
    async listPolicyServers(input: { maxAgeMs?: number } = {}): Promise<PolicyEndpoint[]> {
      const maxAge = input.maxAgeMs ?? 60_000;
      const out: PolicyEndpoint[] = [];
      for (const key of await store.list(registryKeys.policyServerPrefix)) {
        try {
          const r = await store.getJson(key, PolicyServerRegistrationSchema);
          if (now() - r.heartbeatAt <= maxAge) out.push({ serverId: r.serverId, url: r.url });
        } catch {
          // A half-written or foreign registry entry is not a server; skip it.
        }
      }
      return out.sort((a, b) => a.serverId.localeCompare(b.serverId));
    },
  };
}
