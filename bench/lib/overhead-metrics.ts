/**
 * Orchestration overhead of task groups (issue 7.2), pure: what Temporal and MinIO add to a group of
 * episodes beyond the env and the policy. Inputs are the group workflow's history timestamps and the
 * episodes' own timing records (trajectory manifests).
 *
 *   workflow-seen time  = group workflow completed − started (what the campaign waits for)
 *   episode work        = last episode's work ended − first env lease (env + policy, concurrent episodes)
 *   storage             = MinIO time on the critical path: the last episode's upload wait + its trajectory
 *                         writes (steps.jsonl measured; the manifest put after it is taken as equal)
 *   slot wait           = the group's first episode waited for a free env slot (env contention)
 *   temporal            = the rest: workflow tasks, activity scheduling and pickup, result, signal
 */

export interface GroupHistoryTimes {
  groupId: string;
  workflowStartedAt: number;
  activityScheduledAt: number;
  activityStartedAt: number;
  activityCompletedAt: number;
  workflowCompletedAt: number;
}

export interface GroupEpisodeTiming {
  acquiredAt: number;
  queuedAt: number;
  writeStartedAt: number;
  envMs: number;
  actMs: number;
  actCalls: number;
  uploadWaitMs: number;
  stepsWriteMs: number;
  writesParallel?: boolean;
  numSteps: number;
}

/**
 * MinIO time on an episode's critical path, the manifest put taken as long as the steps.jsonl put:
 * upload wait + steps put + manifest put, or (steps put overlapping the upload wait) wait + manifest put.
 */
export const episodeStorageMs = (e: GroupEpisodeTiming): number =>
  e.uploadWaitMs + (e.writesParallel ? 1 : 2) * e.stepsWriteMs;

export interface GroupOverhead {
  groupId: string;
  episodes: number;
  workflowSeenMs: number;
  episodeWorkMs: number;
  storageMs: number;
  /** Episodes waiting for a free env slot before the first one started (env contention, not overhead). */
  slotWaitMs: number;
  temporalMs: number;
  /** Parts of temporalMs: before the activity was scheduled, scheduled → picked up, after it completed. */
  beforeScheduleMs: number;
  scheduleToStartMs: number;
  afterActivityMs: number;
}

export function groupOverhead(h: GroupHistoryTimes, eps: readonly GroupEpisodeTiming[]): GroupOverhead | null {
  if (eps.length === 0) return null;
  const first = Math.min(...eps.map((e) => e.acquiredAt));
  const lastEp = eps.reduce((a, e) => (e.writeStartedAt > a.writeStartedAt ? e : a));
  const episodeWorkMs = Math.max(0, lastEp.writeStartedAt - first);
  const storageMs = episodeStorageMs(lastEp);
  const workflowSeenMs = Math.max(0, h.workflowCompletedAt - h.workflowStartedAt);
  const slotWaitMs = Math.max(0, first - Math.min(...eps.map((e) => e.queuedAt)));
  return {
    groupId: h.groupId,
    episodes: eps.length,
    workflowSeenMs,
    episodeWorkMs,
    storageMs,
    slotWaitMs,
    temporalMs: Math.max(0, workflowSeenMs - episodeWorkMs - storageMs - slotWaitMs),
    beforeScheduleMs: Math.max(0, h.activityScheduledAt - h.workflowStartedAt),
    scheduleToStartMs: Math.max(0, h.activityStartedAt - h.activityScheduledAt),
    afterActivityMs: Math.max(0, h.workflowCompletedAt - h.activityCompletedAt),
  };
}

export interface OverheadSummary {
  groups: number;
  episodes: number;
  steps: number;
  /** Means per group (ms). */
  perGroup: {
    workflowSeenMs: number;
    episodeWorkMs: number;
    storageMs: number;
    slotWaitMs: number;
    temporalMs: number;
  };
  temporalParts: { beforeScheduleMs: number; scheduleToStartMs: number; afterActivityMs: number };
  /** Means per episode (ms): its own env and policy time; storage = its upload wait + writes. */
  perEpisode: { envMs: number; actMs: number; storageMs: number };
  /** Means per step (ms). */
  perStep: { envMs: number; actMs: number };
  /** (storage + temporal) / (workflow-seen time − slot wait), summed over groups. */
  overheadShare: number;
  storageShare: number;
  temporalShare: number;
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

export function summarizeOverhead(
  groups: readonly GroupOverhead[],
  episodes: readonly GroupEpisodeTiming[]
): OverheadSummary {
  const g = Math.max(1, groups.length);
  const e = Math.max(1, episodes.length);
  const steps = sum(episodes.map((x) => x.numSteps));
  const seen = sum(groups.map((x) => x.workflowSeenMs));
  const storage = sum(groups.map((x) => x.storageMs));
  const temporal = sum(groups.map((x) => x.temporalMs));
  const base = seen - sum(groups.map((x) => x.slotWaitMs));
  return {
    groups: groups.length,
    episodes: episodes.length,
    steps,
    perGroup: {
      workflowSeenMs: seen / g,
      episodeWorkMs: sum(groups.map((x) => x.episodeWorkMs)) / g,
      storageMs: storage / g,
      slotWaitMs: sum(groups.map((x) => x.slotWaitMs)) / g,
      temporalMs: temporal / g,
    },
    temporalParts: {
      beforeScheduleMs: sum(groups.map((x) => x.beforeScheduleMs)) / g,
      scheduleToStartMs: sum(groups.map((x) => x.scheduleToStartMs)) / g,
      afterActivityMs: sum(groups.map((x) => x.afterActivityMs)) / g,
    },
    perEpisode: {
      envMs: sum(episodes.map((x) => x.envMs)) / e,
      actMs: sum(episodes.map((x) => x.actMs)) / e,
      storageMs: sum(episodes.map(episodeStorageMs)) / e,
    },
    perStep: {
      envMs: sum(episodes.map((x) => x.envMs)) / Math.max(1, steps),
      actMs: sum(episodes.map((x) => x.actMs)) / Math.max(1, sum(episodes.map((x) => x.actCalls))),
    },
    overheadShare: base > 0 ? (storage + temporal) / base : 0,
    storageShare: base > 0 ? storage / base : 0,
    temporalShare: base > 0 ? temporal / base : 0,
  };
}
