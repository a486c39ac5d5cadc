/**
 * rolloutLaneWorkflow — runs the task groups a scheduler shard hands it (workflows/rollout-shard.ts): each
 * group's episodes are activities of this one workflow, and finished groups go back to the shard in
 * batches (at most every `flushMs` or `maxBatch` groups).
 *
 * Why lanes: as its own child workflow, a group cost a workflow start and close, and about one workflow
 * task per episode (each episode's completion woke the group's workflow). On the 2-core dev server the
 * workflow tasks were the largest Temporal cost per episode (≈ 1.5 workflow tasks, each two history
 * writes, a history read and a task-queue round trip; docs/benchmarks.md, "Scale"). In a lane, the
 * completions of many groups that arrive together share workflow tasks, and no workflow is created per
 * group. The unit of scheduling is still the episode (one activity each, any env worker's free slot).
 *
 * A lane never continues-as-new: its running activities would be orphaned. Its history is bounded
 * instead: the shard seals it once it was handed `laneEpisodes` episodes (512 by default: 2,544–3,284
 * events per lane at 2,048 envs, far below Temporal's 10,240-event warning), and a sealed lane finishes
 * what it runs, reports, and completes while a new lane takes the shard's next groups.
 */
import {
  allHandlersFinished,
  condition,
  getExternalWorkflowHandle,
  log,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { GroupSummary } from '../schemas/campaign';
import { dataActivities } from './activity-proxies';
import { assignGroupsSignal, groupsFinishedSignal, sealLaneSignal, type GroupsFinishedReport } from './messages';
import { ReportBatch } from './report-batch';
import { runTaskGroup, type TaskGroupInput } from './task-group';

export interface RolloutLaneInput {
  campaignId: string;
  /** The shard to report to, by workflow id (reaches its latest run across continue-as-new). */
  shardWorkflowId: string;
  /** Where reports go when the shard cannot take them (it ended and was not started again yet). */
  campaignWorkflowId: string;
  /** The groups to run from the start (later ones arrive by the assignGroups signal). */
  groups: TaskGroupInput[];
  /** Sealed from the start: these groups are all the lane gets. */
  sealed?: boolean;
  /** Report at least this often while groups have finished (ms)… */
  flushMs: number;
  /** …or as soon as this many finished or lost groups are waiting. */
  maxBatch: number;
}

export interface RolloutLaneResult {
  laneId: string;
  groupsRun: number;
  /** Groups whose report reached neither the shard nor the campaign (both gone). */
  groupsDropped: number;
}

export async function rolloutLaneWorkflow(input: RolloutLaneInput): Promise<RolloutLaneResult> {
  const laneId = workflowInfo().workflowId;
  const queued: TaskGroupInput[] = [...input.groups];
  let sealed = input.sealed ?? false;
  let running = 0;
  let groupsRun = 0;
  let groupsDropped = 0;
  let dirty = true;
  const wake = () => {
    dirty = true;
  };
  const batch = new ReportBatch({ flushMs: input.flushMs, maxBatch: input.maxBatch, wake });
  let reportTargetsGone = false;

  setHandler(assignGroupsSignal, (groups: TaskGroupInput[]) => {
    queued.push(...groups);
    wake();
  });
  setHandler(sealLaneSignal, () => {
    sealed = true;
    wake();
  });

  function start(g: TaskGroupInput): void {
    running++;
    groupsRun++;
    void runTaskGroup(g, () => dataActivities)
      .then(
        (summary: GroupSummary) => {
          batch.finished(summary);
        },
        (err: unknown) => {
          // Only its pool activities can fail a group (episodes fail one by one, as infrastructure failures).
          batch.lost(g.groupId, `its lane ${laneId} failed it: ${String(err)}`);
        }
      )
      .finally(() => {
        running--;
        wake();
      });
  }

  async function flush(): Promise<void> {
    const contents = batch.take();
    if (!contents) return;
    const report: GroupsFinishedReport = { shardId: laneId, ...contents };
    if (reportTargetsGone) {
      groupsDropped += report.finished.length + report.lost.length;
      return;
    }
    try {
      await getExternalWorkflowHandle(input.shardWorkflowId).signal(groupsFinishedSignal, report);
    } catch (shardErr) {
      // The shard ended (the campaign starts it again at its next tick): the campaign takes the report itself.
      try {
        await getExternalWorkflowHandle(input.campaignWorkflowId).signal(groupsFinishedSignal, report);
      } catch (campaignErr) {
        log.warn('neither shard nor campaign reachable; the lane finishes what it runs and ends', {
          shard: String(shardErr),
          campaign: String(campaignErr),
        });
        reportTargetsGone = true;
        sealed = true;
        groupsDropped += report.finished.length + report.lost.length;
      }
    }
  }

  const done = () => sealed && running === 0 && queued.length === 0 && batch.size === 0;
  for (;;) {
    // Cleared before anything is read, so a signal during this iteration's awaits wakes the next one.
    dirty = false;
    for (const g of queued.splice(0)) start(g);
    if (batch.due() || (sealed && running === 0)) await flush();
    if (done()) {
      await condition(allHandlersFinished);
      if (done()) break;
      continue;
    }
    batch.armTimer();
    await condition(() => dirty);
  }
  return { laneId, groupsRun, groupsDropped };
}
