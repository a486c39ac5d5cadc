/**
 * rolloutShardWorkflow — one scheduler shard of a campaign with `rollout.schedulerShards` > 1 (issue 12.3).
 * The campaign keeps every decision (which task, how many rollouts, which seed: the pure `tick`) but hands
 * the group starts to k shards, a batch per shard per tick (`assignGroups`), and hears back in batches
 * (`groupsFinished`, at most every `flushMs` or `maxBatch` groups). So the campaign's history and workflow
 * tasks grow per batch, not per group: with one workflow, every group costs the campaign a child start, a
 * start acknowledgement, a signal and a completion; that is what stops one workflow from keeping up when
 * thousands of envs finish groups every second.
 *
 * The shard runs its groups in rollout lanes (workflows/rollout-lane.ts): ABANDON children that each run
 * many groups' episodes in one history and report finished groups back in batches. The open lane takes
 * new groups until it has had `laneEpisodes` episodes; then the shard seals it (it finishes what it runs
 * and completes) and opens the next. A group is counted until it reports or its lane ends without
 * reporting it (failed, terminated), and lost groups are passed on. The shard continues-as-new when the
 * server suggests it, carrying its in-flight group ids and lanes; lanes of earlier runs report to it by
 * workflow id and are settled by `describeChildren` when they end. The campaign asks the shard which
 * groups it holds (the groupsHeld query) before it counts a long-running group as lost.
 *
 * Runs recorded before lanes (patch `shard-runs-groups-in-lanes`) started each group as its own child
 * (taskGroupWorkflow, reporting to the shard by signal); their children are still settled the same way.
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
  groupsHeldQuery,
  sealLaneSignal,
  stopShardSignal,
  type GroupsFinishedReport,
} from './messages';
import { ReportBatch } from './report-batch';
import { rolloutLaneWorkflow } from './rollout-lane';
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
  /** Seal a lane once it was handed this many episodes (default LANE_EPISODES; a test hook and tuning knob). */
  laneEpisodes?: number;
  /** Test hook: continue-as-new after this many loop iterations (besides the server's suggestion). */
  continueAsNewAfterIterations?: number;
  /** Test hooks: how long a child of an earlier run may stay silent before it is described, and how often (ms; default a minute each). */
  reconcileAfterMs?: number;
  reconcileEveryMs?: number;
}

export interface ShardCarried {
  runIndex: number;
  /** Groups started and not yet reported: id → the run that started it, when, and its lane (absent: its own child). */
  inFlight: Record<string, { run: number; startedAtMs: number; lane?: string }>;
  /** Lanes not known to have ended (absent in runs recorded before lanes). */
  lanes?: Record<string, LaneRecord>;
  /** The lane taking new groups (the only one not sealed). */
  openLane?: string | null;
  /** Lanes started by this shard's chain of runs (names the next one). */
  laneSeq?: number;
  /** Assigned, not started yet. */
  queued: TaskGroupInput[];
  outbox: Omit<GroupsFinishedReport, 'shardId'>;
  stopRequested: boolean;
  groupsStarted: number;
}

export interface LaneRecord {
  run: number;
  startedAtMs: number;
  /** Episodes handed to the lane so far. */
  episodes: number;
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
 * Episodes a lane is handed before it is sealed. Its history holds ≈ 3 events per episode (scheduled,
 * started, completed) plus its share of workflow tasks, reports and pool calls: 2,544–3,284 events and at
 * most 1.4 MB per lane at 2,048 simulated envs (docs/benchmarks.md, "Scale"), far below Temporal's
 * 10,240-event warning whatever the group size. Larger lanes share more workflow tasks but live longer.
 */
export const LANE_EPISODES = 512;
/** Runs recorded before this patch started every group as its own taskGroupWorkflow child. */
const SHARD_LANES_PATCH = 'shard-runs-groups-in-lanes';

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
  const useLanes = patched(SHARD_LANES_PATCH);
  const c: ShardCarried = input.carried ?? {
    runIndex: 0,
    inFlight: {},
    queued: [],
    outbox: { finished: [], lost: [] },
    stopRequested: false,
    groupsStarted: 0,
  };
  // Carried by runs recorded before lanes: none yet.
  const lanes: Record<string, LaneRecord> = (c.lanes ??= {});
  c.openLane ??= null;
  c.laneSeq ??= 0;
  const laneEpisodes = input.laneEpisodes ?? LANE_EPISODES;
  let dirty = true;
  const wake = () => {
    dirty = true;
  };
  const batch = new ReportBatch({ flushMs: input.flushMs, maxBatch: input.maxBatch, wake }, c.outbox);
  let reconcileDue = false;
  let reconcileTimer = false;
  let campaignGone = false;
  /** Groups of the report being sent (still held: the campaign has not got them yet). */
  let sending: string[] = [];

  function finished(g: GroupSummary): void {
    // A group this run does not know is passed on too: it was started by an earlier shard run of this id
    // that died (its report then comes here by workflow id). The campaign ignores groups it already settled.
    delete c.inFlight[g.groupId];
    batch.finished(g);
    wake();
  }
  function lost(groupId: string, why: string): void {
    if (!c.inFlight[groupId]) return;
    delete c.inFlight[groupId];
    batch.lost(groupId, why);
    wake();
  }
  /** A lane ended: it reported every group it finished before it ended, so those it holds still are lost. */
  function laneEnded(laneId: string, why: string): void {
    if (!lanes[laneId]) return;
    delete lanes[laneId];
    if (c.openLane === laneId) c.openLane = null;
    for (const [groupId, g] of Object.entries(c.inFlight))
      if (g.lane === laneId) lost(groupId, `its lane ${laneId} ended (${why}) without reporting it`);
    wake();
  }

  setHandler(assignGroupsSignal, (groups: TaskGroupInput[]) => {
    c.queued.push(...groups);
    wake();
  });
  setHandler(groupFinishedSignal, finished);
  setHandler(groupsFinishedSignal, (r: GroupsFinishedReport) => {
    for (const g of r.finished) finished(g);
    for (const l of r.lost) lost(l.groupId, l.why);
  });
  setHandler(stopShardSignal, () => {
    c.stopRequested = true;
    wake();
  });
  setHandler(groupsHeldQuery, () => [
    ...Object.keys(c.inFlight),
    ...c.queued.map((g) => g.groupId),
    ...batch.ids(),
    ...sending,
  ]);

  const pendingStarts = new Set<Promise<void>>();
  function track(started: Promise<void>): void {
    pendingStarts.add(started);
    void started.finally(() => pendingStarts.delete(started));
  }
  /**
   * Lanes of this run whose start is not acknowledged yet: a signal sent before the child exists would
   * fail as if the lane were gone. (Lanes of earlier runs were acknowledged before their continue-as-new.)
   */
  const laneStarts = new Map<string, Promise<void>>();

  /** Runs recorded before lanes: each group its own child. */
  function startGroupChild(g: TaskGroupInput): void {
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
    track(started);
  }

  function holdInLane(groups: TaskGroupInput[], laneId: string): void {
    for (const g of groups) {
      c.inFlight[g.groupId] = { run: c.runIndex, startedAtMs: Date.now(), lane: laneId };
      c.groupsStarted++;
    }
  }

  /** A new lane, started with its first groups (sealed at once when they fill it). */
  function openLane(groups: TaskGroupInput[], episodes: number): void {
    // The chain's first run id keeps lane ids unique across continue-as-new and a restart of the shard under
    // the same id (its old lanes may still run). Its random tail: run ids are UUIDv7, whose head is a timestamp.
    const laneId = `${shardId}-lane-${workflowInfo().firstExecutionRunId.slice(-12)}-${c.laneSeq!++}`;
    const sealed = episodes >= laneEpisodes;
    lanes[laneId] = { run: c.runIndex, startedAtMs: Date.now(), episodes };
    if (!sealed) c.openLane = laneId;
    holdInLane(groups, laneId);
    const started = startChild(rolloutLaneWorkflow, {
      workflowId: laneId,
      taskQueue: TASK_QUEUES.orchestrator,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [
        {
          campaignId: input.campaignId,
          shardWorkflowId: shardId,
          campaignWorkflowId: input.campaignWorkflowId,
          groups,
          sealed,
          flushMs: input.flushMs,
          maxBatch: input.maxBatch,
        },
      ],
    }).then(
      (handle) => {
        void handle.result().then(
          () => laneEnded(laneId, 'completed'),
          (err: unknown) => laneEnded(laneId, String(err))
        );
      },
      (err: unknown) => laneEnded(laneId, `could not start: ${String(err)}`)
    );
    track(started);
    laneStarts.set(laneId, started);
    void started.finally(() => laneStarts.delete(laneId));
  }

  /** Hands groups to the open lane (by signal) until it is full, then to new lanes. */
  async function placeInLanes(groups: TaskGroupInput[]): Promise<void> {
    let rest = groups;
    while (rest.length > 0) {
      const laneId = c.openLane;
      const open = laneId ? lanes[laneId] : undefined;
      const room = open ? laneEpisodes - open.episodes : laneEpisodes;
      // At least one group per batch: a group larger than a lane still gets one.
      let take = 0;
      let episodes = 0;
      while (take < rest.length && (take === 0 || episodes + rest[take]!.n <= room)) episodes += rest[take++]!.n;
      const batch = rest.slice(0, take);
      rest = rest.slice(take);
      if (!laneId || !open) {
        openLane(batch, episodes);
        continue;
      }
      open.episodes += episodes;
      holdInLane(batch, laneId);
      await laneStarts.get(laneId);
      if (!lanes[laneId]) {
        // It could not start: its groups, these included, were passed on as lost.
        continue;
      }
      try {
        await getExternalWorkflowHandle(laneId).signal(assignGroupsSignal, batch);
        if (open.episodes >= laneEpisodes) await seal(laneId);
      } catch (err) {
        // The lane ended unexpectedly (terminated, failed): its groups, these included, are lost.
        laneEnded(laneId, `not reachable: ${String(err)}`);
      }
    }
  }

  /** Seals the open lane: it gets no more groups, finishes what it runs and completes. */
  async function seal(laneId: string): Promise<void> {
    if (c.openLane !== laneId) return;
    c.openLane = null;
    await laneStarts.get(laneId);
    if (!lanes[laneId]) return;
    try {
      await getExternalWorkflowHandle(laneId).signal(sealLaneSignal);
    } catch (err) {
      laneEnded(laneId, `not reachable: ${String(err)}`);
    }
  }

  async function startQueued(): Promise<void> {
    const groups = c.queued.splice(0);
    if (groups.length === 0) return;
    if (useLanes) await placeInLanes(groups);
    else for (const g of groups) startGroupChild(g);
  }

  function settle(d: ChildDescription): void {
    if (d.status === 'RUNNING') return;
    if (lanes[d.workflowId]) return laneEnded(d.workflowId, d.status);
    if (!c.inFlight[d.workflowId]) return;
    if (d.status !== 'COMPLETED') return lost(d.workflowId, d.status);
    const r = d.result as GroupSummary | GroupReported;
    if (isGroupSummary(r)) finished(r);
    else lost(r.groupId, 'completed and reported, but its report never arrived');
  }

  async function reconcile(): Promise<void> {
    reconcileDue = false;
    const now = Date.now();
    const quietTooLong = (x: { run: number; startedAtMs: number }) =>
      x.run < c.runIndex && now - x.startedAtMs > (input.reconcileAfterMs ?? RECONCILE_AFTER_MS);
    const ids = [
      // Groups of earlier runs that are their own child (runs recorded before lanes).
      ...Object.entries(c.inFlight)
        .filter(([, g]) => g.lane === undefined && quietTooLong(g))
        .map(([id]) => id),
      ...Object.entries(lanes)
        .filter(([, l]) => quietTooLong(l))
        .map(([id]) => id),
    ];
    // (The activity describes at most its first 100; the rest wait for the next reconcile.)
    if (ids.length > 0) for (const d of await children.describeChildren({ workflowIds: ids })) settle(d);
  }

  async function flush(): Promise<void> {
    const ids = batch.ids();
    const contents = batch.take();
    if (!contents || campaignGone) return;
    const report: GroupsFinishedReport = { shardId, ...contents };
    sending = ids;
    try {
      await getExternalWorkflowHandle(input.campaignWorkflowId).signal(groupsFinishedSignal, report);
    } catch (err) {
      // The campaign has finished: nobody is left to report to. Drain what runs and stop.
      log.warn('campaign not reachable; shard stops after its groups', { error: String(err) });
      campaignGone = true;
      c.stopRequested = true;
    } finally {
      sending = [];
    }
  }

  function timers(): void {
    batch.armTimer();
    const earlierRuns =
      c.runIndex > 0 && (Object.keys(c.inFlight).length > 0 || Object.values(lanes).some((l) => l.run < c.runIndex));
    if (earlierRuns && !reconcileTimer) {
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
    await startQueued();
    if (reconcileDue) await reconcile();
    // A stopping shard gives its lanes no more groups: sealed, they finish what they run and complete.
    if (c.stopRequested && c.openLane) await seal(c.openLane);
    if (batch.due() || c.stopRequested) await flush();
    const idle = Object.keys(c.inFlight).length === 0 && c.queued.length === 0 && batch.size === 0;
    if (c.stopRequested && idle) break;
    const canDue =
      workflowInfo().continueAsNewSuggested ||
      (input.continueAsNewAfterIterations !== undefined && iterations >= input.continueAsNewAfterIterations);
    if (canDue) {
      while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
      await condition(allHandlersFinished);
      await startQueued(); // assigned while the starts were acknowledged
      while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
      await flush();
      return continueAsNew<typeof rolloutShardWorkflow>({
        ...input,
        carried: { ...c, outbox: batch.carry(), runIndex: c.runIndex + 1 },
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
