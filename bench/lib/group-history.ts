/**
 * Task-group timing as Temporal recorded it: from a group workflow's event history, when the workflow
 * started and completed, and when its episode activities were scheduled (the first), picked up (the
 * first) and completed (the last). Each episode is its own `runEpisode` activity (the unit of
 * scheduling); histories of older builds with one batched `runEpisodes` activity read the same way.
 */
import { tsToMs } from '@temporalio/common/lib/time';
import type { Client } from '@temporalio/client';
import type { GroupHistoryTimes } from './overhead-metrics';

const EPISODE_ACTIVITIES = new Set(['runEpisode', 'runEpisodes']);

export async function groupHistoryTimes(client: Client, groupId: string): Promise<GroupHistoryTimes | null> {
  const history = await client.workflow.getHandle(groupId).fetchHistory();
  const t: Partial<GroupHistoryTimes> = { groupId };
  const episodeActivities = new Set<string>();
  for (const e of history.events ?? []) {
    const at = tsToMs(e.eventTime);
    if (e.workflowExecutionStartedEventAttributes) t.workflowStartedAt = at;
    else if (e.workflowExecutionCompletedEventAttributes) t.workflowCompletedAt = at;
    else if (EPISODE_ACTIVITIES.has(e.activityTaskScheduledEventAttributes?.activityType?.name ?? '')) {
      t.activityScheduledAt ??= at;
      episodeActivities.add(String(e.eventId));
    } else if (
      e.activityTaskStartedEventAttributes &&
      episodeActivities.has(String(e.activityTaskStartedEventAttributes.scheduledEventId))
    ) {
      t.activityStartedAt ??= at;
    } else if (
      e.activityTaskCompletedEventAttributes &&
      episodeActivities.has(String(e.activityTaskCompletedEventAttributes.scheduledEventId))
    ) {
      t.activityCompletedAt = at;
    }
  }
  const complete =
    t.workflowStartedAt !== undefined &&
    t.workflowCompletedAt !== undefined &&
    t.activityScheduledAt !== undefined &&
    t.activityStartedAt !== undefined &&
    t.activityCompletedAt !== undefined;
  return complete ? (t as GroupHistoryTimes) : null;
}
