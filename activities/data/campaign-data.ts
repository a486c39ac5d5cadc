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
import { DiscardRecordSchema, type DiscardEvent, type DiscardedTrajectory } from '../../schemas/discards';
import { TrajectoryManifestSchema } from '../../schemas/records';
import { keys, registryKeys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';

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

export function createCampaignDataActivities(deps: { store: ObjectStore; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const { store } = deps;
  return {
    /** Adds successful trajectories to their task's pool (idempotent: the key is the trajectory id). */
    async addToPool(input: { campaignId: string; trajectories: TrajectorySummary[] }): Promise<number> {
      let added = 0;
      for (const t of input.trajectories) {
        if (!(t.reward !== null && t.reward > 0)) continue;
        await store.putJson(
          keys.poolEntry(input.campaignId, t.taskId, t.trajectoryId),
          { ...t, injectedFromPool: false, pooledAt: now() },
          PoolEntrySchema
        );
        added++;
      }
      return added;
    },

    /** The most recent pooled success of a task (DART §3.4 c), or null. */
    async findPoolSuccess(input: { campaignId: string; taskId: string }): Promise<TrajectorySummary | null> {
      const entries = await store.list(keys.poolPrefix(input.campaignId, input.taskId));
      let best: z.infer<typeof PoolEntrySchema> | null = null;
      for (const key of entries) {
        const e = await store.getJson(key, PoolEntrySchema);
        if (!best || e.pooledAt > best.pooledAt) best = e;
      }
      if (!best) return null;
      const { pooledAt: _pooledAt, ...summary } = best;
      return summary;
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
      };
      await store.putJson(
        keys.poolEntry(input.campaignId, m.taskId, m.trajectoryId),
        { ...summary, pooledAt: now() },
        PoolEntrySchema
      );
    },

    /**
     * Why completed trajectories were not trained on: one record per group and event (idempotent: the
     * key is derived from both, so a retried activity rewrites the same object).
     */
    async recordDiscards(input: {
      campaignId: string;
      policyVersion: number;
      trainStep: number;
      entries: Array<{ groupId: string; taskId: string; event: DiscardEvent; trajectories: DiscardedTrajectory[] }>;
    }): Promise<number> {
      for (const e of input.entries) {
        await store.putJson(
          keys.discardRecord(input.campaignId, e.groupId, e.event),
          {
            schemaVersion: 1,
            campaignId: input.campaignId,
            groupId: e.groupId,
            taskId: e.taskId,
            event: e.event,
            policyVersion: input.policyVersion,
            trainStep: input.trainStep,
            trajectories: e.trajectories,
            createdAt: now(),
          },
          DiscardRecordSchema
        );
      }
      return input.entries.length;
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
