/**
 * Task-group timing as Temporal recorded it: from a group workflow's event history, when the workflow
 * started and completed and when its runEpisodes activity was scheduled, picked up and completed.
 */
import { tsToMs } from '@temporalio/common/lib/time';
import type { Client } from '@temporalio/client';
import type { GroupHistoryTimes } from './overhead-metrics';

export async function groupHistoryTimes(client: Client, groupId: string): Promise<GroupHistoryTimes | null> {
  const history = await client.workflow.getHandle(groupId).fetchHistory();
  const t: Partial<GroupHistoryTimes> = { groupId };
  let runEpisodesId: string | undefined;
  for (const e of history.events ?? []) {
    const at = tsToMs(e.eventTime);
    if (e.workflowExecutionStartedEventAttributes) t.workflowStartedAt = at;
    else if (e.workflowExecutionCompletedEventAttributes) t.workflowCompletedAt = at;
    else if (
      e.activityTaskScheduledEventAttributes?.activityType?.name === 'runEpisodes' &&
      t.activityScheduledAt === undefined
    ) {
      t.activityScheduledAt = at;
      runEpisodesId = String(e.eventId);
    } else if (
      e.activityTaskStartedEventAttributes &&
      String(e.activityTaskStartedEventAttributes.scheduledEventId) === runEpisodesId
    ) {
      t.activityStartedAt = at;
    } else if (
      e.activityTaskCompletedEventAttributes &&
      String(e.activityTaskCompletedEventAttributes.scheduledEventId) === runEpisodesId
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
