/**
 * The compact per-trajectory summary a task group reports to the campaign (and the in-process learning
 * loop builds the same way). Pure and Node-free: workflows use it.
 */
import type { RunEpisodeResult } from '../../activities/env/input';
import type { TrajectorySummary } from '../../schemas/campaign';

/** An episode result as a summary; the reward is kept only for an `ok` episode (infra failures get none). */
export function toTrajectorySummary(r: RunEpisodeResult, groupId: string): TrajectorySummary {
  return {
    trajectoryId: r.trajectoryId,
    manifestKey: r.manifestKey,
    taskId: r.taskId,
    groupId,
    reward: r.status === 'ok' ? r.reward : null,
    status: r.status,
    numSteps: r.numSteps,
    minPolicyVersion: r.minPolicyVersion,
    maxPolicyVersion: r.maxPolicyVersion,
    injectedFromPool: false,
    ...(r.instructionKey ? { instructionKey: r.instructionKey } : {}),
  };
}
