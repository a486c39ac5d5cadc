/**
 * rolloutShardWorkflow — one scheduler shard of a campaign with `rollout.schedulerShards` > 1 (issue 12.3).
 * The campaign keeps every decision (which task, how many rollouts, which seed: the pure `tick`) but hands
 * the group starts to k shards, a batch per shard per tick (`assignGroups`), and hears back in batches
 * (`groupsFinished`, at most every `flushMs` or `maxBatch` groups). So the campaign's history and workflow
 * tasks grow per batch, not per group: with one workflow, every group costs the campaign a child start, a
 * start acknowledgement, a signal and a completion; that is what stops one workflow from keeping up when
 * thousands of envs finish groups every second.
 *
 * The shard starts each group as its own ABANDON child (the group reports to the shard by signal, as it
 * would to the campaign), counts it until it reports or ends, and passes lost groups on (a child that
 * failed, was terminated or could not start). It continues-as-new when the server suggests it, carrying
 * its in-flight group ids; children of earlier runs are settled by `describeChildren`, as the campaign does.
 * If a shard dies, its groups still end: their signal to it fails, so they return their summary as their
 * result, and the campaign's own reconcile (workflows/campaign.ts) settles them by describing them.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  log,
  ParentClosePolicy,
  patched,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { ChildDescription } from '../activities/data/children';
import type { GroupSummary } from '../schemas/campaign';
import { TASK_QUEUES } from '../schemas/task-queues';
import { childActivities } from './activity-proxies';
import {
  assignGroupsSignal,
  groupFinishedSignal,
  groupsFinishedSignal,
  stopShardSignal,
  type GroupsFinishedReport,
} from './messages';
import { isGroupSummary, taskGroupWorkflow, type GroupReported, type TaskGroupInput } from './task-group';

export interface RolloutShardInput {
  campaignId: string;
  /** The campaign to report to, by workflow id (so reports reach its latest run across continue-as-new). */
  campaignWorkflowId: string;
  /** Report at least this often while groups have finished (ms). */
  flushMs: number;
  /** …or as soon as this many finished or lost groups are waiting. */
  maxBatch: number;
  /** Carried by continue-as-new. */
  carried?: ShardCarried;
  /** Test hook: continue-as-new after this many loop iterations (besides the server's suggestion). */
  continueAsNewAfterIterations?: number;
  /** Test hooks: how long a child of an earlier run may stay silent before it is described, and how often (ms; default a minute each). */
  reconcileAfterMs?: number;
  reconcileEveryMs?: number;
}

export interface ShardCarried {
  runIndex: number;
  /** Groups started and not yet reported: id → the run that started it and when. */
  inFlight: Record<string, { run: number; startedAtMs: number }>;
  /** Assigned, not started yet. */
  queued: TaskGroupInput[];
  outbox: Omit<GroupsFinishedReport, 'shardId'>;
  stopRequested: boolean;
  groupsStarted: number;
}

export interface RolloutShardResult {
  shardId: string;
  groupsStarted: number;
  runIndex: number;
}

const children = childActivities;

/** Children of an earlier run that have not reported after this long are described (they may have ended). */
const RECONCILE_AFTER_MS = 60_000;
const RECONCILE_EVERY_MS = 60_000;

/**
 * Runs recorded before this patch cleared the wake flag after the loop's awaits (a report flush, a
 * reconcile), so groups assigned during one of them were not started until some later signal or timer
 * woke the loop, and never when none came: the campaign then counted them in flight for good, their
 * episodes holding envConcurrency (seen at 512 envs: 109 groups, 803 episodes, until the 15-minute
 * sharded reconcile). The flag is now cleared at the top of each iteration, before anything is read.
 */
const SHARD_WAKE_AT_TOP_PATCH = 'shard-wake-flag-cleared-before-reading';

export async function rolloutShardWorkflow(input: RolloutShardInput): Promise<RolloutShardResult> {
  const shardId = workflowInfo().workflowId;
  const c: ShardCarried = input.carried ?? {
    runIndex: 0,
    inFlight: {},
    queued: [],
    outbox: { finished: [], lost: [] },
    stopRequested: false,
    groupsStarted: 0,
  };
  let dirty = true;
  const wake = () => {
    dirty = true;
  };
  let flushDue = false;
  let flushTimer = false;
  let reconcileDue = false;
  let reconcileTimer = false;
  let campaignGone = false;

  const waiting = () => c.outbox.finished.length + c.outbox.lost.length;
  function finished(g: GroupSummary): void {
    // A group this run does not know is passed on too: it was started by an earlier shard run of this id
    // that died (its report then comes here by workflow id). The campaign ignores groups it already settled.
    delete c.inFlight[g.groupId];
    c.outbox.finished.push(g);
    wake();
  }
  function lost(groupId: string, why: string): void {
    if (!c.inFlight[groupId]) return;
    delete c.inFlight[groupId];
    c.outbox.lost.push({ groupId, why });
    wake();
  }

  setHandler(assignGroupsSignal, (groups: TaskGroupInput[]) => {
    c.queued.push(...groups);
    wake();
  });
  setHandler(groupFinishedSignal, finished);
  setHandler(stopShardSignal, () => {
    c.stopRequested = true;
    wake();
  });

  const pendingStarts = new Set<Promise<void>>();
  function startGroup(g: TaskGroupInput): void {
    c.inFlight[g.groupId] = { run: c.runIndex, startedAtMs: Date.now() };
    c.groupsStarted++;
    const started = startChild(taskGroupWorkflow, {
      workflowId: g.groupId,
      taskQueue: TASK_QUEUES.orchestrator,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [{ ...g, parentWorkflowId: shardId }],
    }).then(
      (handle) => {
        void handle.result().then(
          (r: GroupSummary | GroupReported) => {
            // An ack means the group's signal was applied before its completion: it is no longer in flight.
            if (isGroupSummary(r)) finished(r);
            else lost(r.groupId, 'completed and reported, but its report never arrived');
          },
          (err: unknown) => lost(g.groupId, String(err))
        );
      },
      (err: unknown) => lost(g.groupId, `could not start: ${String(err)}`)
    );
    pendingStarts.add(started);
    void started.finally(() => pendingStarts.delete(started));
  }

  function settle(d: ChildDescription): void {
    if (d.status === 'RUNNING' || !c.inFlight[d.workflowId]) return;
    if (d.status !== 'COMPLETED') return lost(d.workflowId, d.status);
    const r = d.result as GroupSummary | GroupReported;
    if (isGroupSummary(r)) finished(r);
    else lost(r.groupId, 'completed and reported, but its report never arrived');
  }

  async function reconcile(): Promise<void> {
    reconcileDue = false;
    const now = Date.now();
    const ids = Object.entries(c.inFlight)
      .filter(([, g]) => g.run < c.runIndex && now - g.startedAtMs > (input.reconcileAfterMs ?? RECONCILE_AFTER_MS))
      .map(([id]) => id);
    if (ids.length > 0) for (const d of await children.describeChildren({ workflowIds: ids })) settle(d);
  }

  async function flush(): Promise<void> {
    flushDue = false;
    if (waiting() === 0) return;
    const report: GroupsFinishedReport = { shardId, ...c.outbox };
    c.outbox = { finished: [], lost: [] };
    if (campaignGone) return;
    try {
      await getExternalWorkflowHandle(input.campaignWorkflowId).signal(groupsFinishedSignal, report);
    } catch (err) {
      // The campaign has finished: nobody is left to report to. Drain what runs and stop.
      log.warn('campaign not reachable; shard stops after its groups', { error: String(err) });
      campaignGone = true;
      c.stopRequested = true;
    }
  }

  function timers(): void {
    if (waiting() > 0 && !flushTimer) {
      flushTimer = true;
      void sleep(input.flushMs).then(() => {
        flushTimer = false;
        flushDue = true;
        wake();
      });
    }
    if (c.runIndex > 0 && Object.keys(c.inFlight).length > 0 && !reconcileTimer) {
      reconcileTimer = true;
      void sleep(input.reconcileEveryMs ?? RECONCILE_EVERY_MS).then(() => {
        reconcileTimer = false;
        reconcileDue = true;
        wake();
      });
    }
  }

  const wakeAtTop = patched(SHARD_WAKE_AT_TOP_PATCH);
  let iterations = 0;
  for (;;) {
    iterations++;
    // Cleared before the loop reads anything, so a signal during this iteration's awaits wakes the next one.
    if (wakeAtTop) dirty = false;
    for (const g of c.queued.splice(0)) startGroup(g);
    if (reconcileDue) await reconcile();
    if (flushDue || waiting() >= input.maxBatch || c.stopRequested) await flush();
    const idle = Object.keys(c.inFlight).length === 0 && c.queued.length === 0 && waiting() === 0;
    if (c.stopRequested && idle) break;
    const canDue =
      workflowInfo().continueAsNewSuggested ||
      (input.continueAsNewAfterIterations !== undefined && iterations >= input.continueAsNewAfterIterations);
    if (canDue) {
      while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
      await condition(allHandlersFinished);
      for (const g of c.queued.splice(0)) startGroup(g); // assigned while the starts were acknowledged
      while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
      await flush();
      return continueAsNew<typeof rolloutShardWorkflow>({
        ...input,
        carried: { ...c, runIndex: c.runIndex + 1 },
      });
    }
    timers();
    if (!wakeAtTop) dirty = false;
    await condition(() => dirty);
  }
  while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
  await condition(allHandlersFinished);
  return { shardId, groupsStarted: c.groupsStarted, runIndex: c.runIndex };
}
