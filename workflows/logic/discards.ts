/**
 * Why a completed (ok) rollout trajectory was not trained on: the data manager records one small
 * discard record per group and event (activities/data/campaign-data.ts recordDiscards), so the ledger
 * plus these records account for every trajectory a campaign produced (cli/lineage.ts, infra/chaos-audit.ts).
 * Pure (no Temporal, no I/O): the campaign workflow and tests share it.
 */
import type { DiscardEvent, DiscardedTrajectory } from '../../schemas/discards';
import type { TrainBatch } from './campaign-state';

/** What discard records need of a group: a GroupSummary or its buffered (compact) form. */
interface GroupLike {
  groupId: string;
  taskId: string;
  trajectories: ReadonlyArray<{ trajectoryId: string; injectedFromPool: boolean; reward: number | null }>;
}

export interface DiscardEntry {
  groupId: string;
  taskId: string;
  event: DiscardEvent;
  trajectories: DiscardedTrajectory[];
  /** The campaign's head when it decided (stamped by the campaign; absent: the write's batch values). */
  policyVersion?: number;
  trainStep?: number;
}

/** Online (not pool-injected) trajectories that carry a reward: what a group contributes as training data. */
const online = (g: GroupLike) => g.trajectories.filter((t) => !t.injectedFromPool && t.reward !== null);

/**
 * What a train step about to start leaves out of the groups it takes from the buffer: whole groups the
 * curation skipped (with its reason), and within trained groups the stale and the down-sampled ones.
 */
export function batchDiscards<G extends GroupLike>(
  taken: readonly G[],
  batch: TrainBatch,
  isStale: (t: G['trajectories'][number]) => boolean
): DiscardEntry[] {
  const trained = new Map(batch.groups.map((g) => [g.groupId, new Set(g.trajectories.map((t) => t.trajectoryId))]));
  const skipped = new Map(batch.skipped.map((x) => [x.groupId, x.reason]));
  const out: DiscardEntry[] = [];
  for (const groupId of batch.takenGroupIds) {
    const g = taken.find((x) => x.groupId === groupId);
    if (!g) continue;
    const used = trained.get(groupId);
    const skipReason = skipped.get(groupId);
    const trajectories: DiscardedTrajectory[] = [];
    for (const t of online(g)) {
      if (used?.has(t.trajectoryId)) continue;
      const stale = isStale(t);
      const reason = stale ? 'stale' : skipReason ? `curation:${skipReason.replace(/^stale\//, '')}` : 'down-sampled';
      trajectories.push({ trajectoryId: t.trajectoryId, reason });
    }
    if (trajectories.length > 0) out.push({ groupId, taskId: g.taskId, event: 'train', trajectories });
  }
  return out;
}

/** Every online trajectory of these groups, for one reason (stale prune, unused at stop, failed step). */
export function groupDiscards(groups: readonly GroupLike[], event: DiscardEvent, reason: string): DiscardEntry[] {
  return groups
    .map((g) => ({
      groupId: g.groupId,
      taskId: g.taskId,
      event,
      trajectories: online(g).map((t) => ({ trajectoryId: t.trajectoryId, reason })),
    }))
    .filter((e) => e.trajectories.length > 0);
}

/** Trajectories a group lost to infrastructure failures (after retries): never a reward, never trained. */
export function lostDiscards(g: { groupId: string; taskId: string; lostTrajectoryIds?: string[] }): DiscardEntry[] {
  const lost = g.lostTrajectoryIds ?? [];
  if (lost.length === 0) return [];
  return [
    {
      groupId: g.groupId,
      taskId: g.taskId,
      event: 'lost',
      trajectories: lost.map((trajectoryId) => ({ trajectoryId, reason: 'lost-infra' })),
    },
  ];
}

/** A train step that failed for good (refused or out of retries): its trajectories were taken but not trained on. */
export function failedStepDiscards(
  groups: ReadonlyArray<{ groupId: string; taskId: string; trajectoryIds: readonly string[] }>
): DiscardEntry[] {
  return groups
    .map((g) => ({
      groupId: g.groupId,
      taskId: g.taskId,
      event: 'failed-step' as const,
      trajectories: g.trajectoryIds.map((trajectoryId) => ({ trajectoryId, reason: 'train-step-failed' })),
    }))
    .filter((e) => e.trajectories.length > 0);
}

/** A group whose child workflow failed, was terminated or timed out: all of its episodes are lost. */
export function lostGroupDiscards(g: { groupId: string; n: number; taskId: string }): DiscardEntry[] {
  return lostDiscards({
    groupId: g.groupId,
    taskId: g.taskId,
    lostTrajectoryIds: Array.from({ length: g.n }, (_, i) => `${g.groupId}-e${i}`),
  });
}
