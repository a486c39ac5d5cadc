/**
 * Why a completed (ok) rollout trajectory was not trained on: the data manager records one small
 * discard record per group and event (activities/data/campaign-data.ts recordDiscards), so the ledger
 * plus these records account for every trajectory a campaign produced (cli/lineage.ts, infra/chaos-audit.ts).
 * Pure (no Temporal, no I/O): the campaign workflow and tests share it.
 */
import type { GroupSummary } from '../../schemas/campaign';
import type { DiscardEvent, DiscardedTrajectory } from '../../schemas/discards';
import type { TrainBatch } from './campaign-state';

export interface DiscardEntry {
  groupId: string;
  taskId: string;
  event: DiscardEvent;
  trajectories: DiscardedTrajectory[];
}

/** Online (not pool-injected) trajectories that carry a reward: what a group contributes as training data. */
const online = (g: GroupSummary) => g.trajectories.filter((t) => !t.injectedFromPool && t.reward !== null);

/**
 * What a train step about to start leaves out of the groups it takes from the buffer: whole groups the
 * curation skipped (with its reason), and within trained groups the stale and the down-sampled ones.
 */
export function batchDiscards(
  buffer: readonly GroupSummary[],
  batch: TrainBatch,
  trainVersion: number,
  maxStaleness: number
): DiscardEntry[] {
  const trained = new Map(batch.groups.map((g) => [g.groupId, new Set(g.trajectories.map((t) => t.trajectoryId))]));
  const skipped = new Map(batch.skipped.map((x) => [x.groupId, x.reason]));
  const out: DiscardEntry[] = [];
  for (const groupId of batch.takenGroupIds) {
    const g = buffer.find((x) => x.groupId === groupId);
    if (!g) continue;
    const used = trained.get(groupId);
    const skipReason = skipped.get(groupId);
    const trajectories: DiscardedTrajectory[] = [];
    for (const t of online(g)) {
      if (used?.has(t.trajectoryId)) continue;
      const stale = t.maxPolicyVersion < trainVersion - maxStaleness;
      const reason = stale ? 'stale' : skipReason ? `curation:${skipReason.replace(/^stale\//, '')}` : 'down-sampled';
      trajectories.push({ trajectoryId: t.trajectoryId, reason });
    }
    if (trajectories.length > 0) out.push({ groupId, taskId: g.taskId, event: 'train', trajectories });
  }
  return out;
}

/** Every online trajectory of these groups, for one reason (stale prune, unused at stop, failed step). */
export function groupDiscards(groups: readonly GroupSummary[], event: DiscardEvent, reason: string): DiscardEntry[] {
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
export function lostDiscards(g: GroupSummary): DiscardEntry[] {
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
export function failedStepDiscards(batch: TrainBatch): DiscardEntry[] {
  return batch.groups
    .map((g) => ({
      groupId: g.groupId,
      taskId: g.taskId,
      event: 'failed-step' as const,
      trajectories: g.trajectories
        .filter((t) => !t.injectedFromPool)
        .map((t) => ({ trajectoryId: t.trajectoryId, reason: 'train-step-failed' })),
    }))
    .filter((e) => e.trajectories.length > 0);
}
