/**
 * campaignWorkflow — a DART training campaign (days long). The workflow is a thin executor of a pure
 * state machine (workflows/logic/campaign-loop.ts `tick`): rollout-wise scheduling keeps env capacity
 * full, train steps start whenever enough eligible groups are buffered and overlap the rollouts
 * (staleness bound along the version lineage), every new checkpoint rolls out server by server, held-out
 * evaluations feed the learning curve. `mode: sync` runs the coupled baseline through the same code.
 *
 * Nothing long runs in this workflow: task groups, train steps, model rollouts and evaluations are ABANDON
 * children that report back by signal to the campaign's workflow id (so they reach its latest run), and
 * whose refs travel in the carried state. Continue-as-new therefore never waits for a train step or a
 * rollout, and the history stays small. A child that ends without reporting (failed, terminated, timed
 * out) is settled from its result watcher (children of this run) or by `describeChildren` (children of
 * earlier runs). Carried state is versioned and validated (workflows/logic/state-schema.ts).
 */
import {
  allHandlersFinished,
  type ChildWorkflowOptions,
  type WithWorkflowArgs,
  type Workflow,
  ApplicationFailure,
  condition,
  continueAsNew,
  executeChild,
  getExternalWorkflowHandle,
  log,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createCampaignSetupActivities } from '../activities/data/campaign-setup';
import type { ChildDescription } from '../activities/data/children';
import { CampaignConfigSchema, type CampaignConfigInput } from '../schemas/config';
import { SEARCH_ATTRIBUTES } from '../schemas/search-attributes';
import { TASK_QUEUES } from '../schemas/task-queues';
import {
  childActivities,
  dataActivities,
  dataLocalActivities,
  trainerActivitiesOn,
  trainerHeartbeatMs,
  trainerQueueOf,
} from './activity-proxies';
import type { EvalPoint, GroupSummary } from '../schemas/campaign';
import { applyLiveOverrides } from './logic/live-config';
import { CoalescingWriter } from './logic/coalescing-writer';
import {
  batchDiscards,
  failedStepDiscards,
  groupDiscards,
  lostDiscards,
  lostGroupDiscards,
  type DiscardEntry,
} from './logic/discards';
import {
  adoptTrainedVersion,
  applyRolloutOutcome,
  campaignStatus,
  groupPoolOptions,
  initialCampaignState,
  isTrainable,
  pruneStaleBuffer,
  recordEval,
  recordGroup,
  recordGroupLost,
  setEndpoints,
  simulatedTrainStepMs,
  trainerPolicyOf,
  trimBuffer,
  isSuccessReward,
  type CampaignState,
  type GroupPlan,
  type RolloutOutcome,
} from './logic/campaign-state';
import { startEval as beginEval, startRollout as beginRollout, tick, type CampaignAction } from './logic/campaign-loop';
import { addVersion } from './logic/lineage';
import { loadCarriedState, stateBytes, STATE_INLINE_LIMIT_BYTES } from './logic/state-schema';
import { demoTaskOrder } from './logic/demo-schedule';
import {
  assignGroupsSignal,
  evalFinishedSignal,
  groupFinishedSignal,
  groupsFinishedSignal,
  stopShardSignal,
  type GroupsFinishedReport,
  injectSuccessUpdate,
  modelRolledOutSignal,
  pauseUpdate,
  pinCheckpointUpdate,
  quarantineTaskUpdate,
  resumeUpdate,
  setConfigUpdate,
  statusQuery,
  stopUpdate,
  taskStatsQuery,
  trainStepFinishedSignal,
  type TrainStepOutcome,
} from './messages';
import { evaluateWorkflow } from './evaluate';
import { modelRolloutWorkflow, type ModelRolloutResult } from './model-rollout';
import { precollectWorkflow } from './precollect';
import { rolloutShardWorkflow } from './rollout-shard';
import {
  groupSummaryOf,
  isGroupSummary,
  taskGroupWorkflow,
  type GroupReported,
  type TaskGroupInput,
} from './task-group';
import { trainStepWorkflow } from './train-step';

export interface CampaignInput {
  config: CampaignConfigInput;
  /** Carried by continue-as-new (validated and migrated by loadCarriedState); absent on the first run. */
  state?: unknown;
  /** Carried by reference when the state is too large to travel inline (saveCampaignState). */
  stateRef?: { key: string };
  /** Test hook: continue-as-new after this many loop iterations (in addition to the server's suggestion). */
  continueAsNewAfterIterations?: number;
  /** Test hook: the same for the scheduler shards (rollout.schedulerShards > 1). */
  shardContinueAsNewAfterIterations?: number;
  /** Test hook: episodes per rollout lane of a shard (default LANE_EPISODES in workflows/rollout-shard.ts). */
  shardLaneEpisodes?: number;
  /**
   * Reports that reached the previous run after it began to continue-as-new (or before its state was
   * loaded): applied by this run once its state is ready, so no group, step or evaluation is lost.
   */
  lateReports?: LateReport[];
}

/** A child's report held back while the campaign's state is not live (see CampaignInput.lateReports). */
export type LateReport =
  | { kind: 'groupFinished'; summary: GroupSummary }
  | { kind: 'groupAcked'; groupId: string }
  | { kind: 'groupLost'; groupId: string; why: string }
  | { kind: 'trainFinished'; outcome: TrainStepOutcome }
  | { kind: 'rolledOut'; outcome: RolloutOutcome }
  | { kind: 'rolloutLost'; version: number; why: string }
  | { kind: 'evalFinished'; point: EvalPoint }
  | { kind: 'evalLost'; why: string };

export interface CampaignResult {
  campaignId: string;
  policyVersion: number;
  episodes: number;
  trainSteps: number;
  finalEval: EvalPoint | null;
  evals: EvalPoint[];
  infraFailures: number;
  wallMs: number;
}

const setup = proxyActivities<ReturnType<typeof createCampaignSetupActivities>>({
  taskQueue: TASK_QUEUES.orchestrator,
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '30 seconds',
    maximumAttempts: 20,
    nonRetryableErrorTypes: ['TaskConfigError', 'ConfigError'],
  },
});
const children = childActivities;
const data = dataActivities;

/**
 * Runs recorded before this change applied every report at once, also while continuing-as-new (a group that
 * finished during the last discard flush had its buffer-full discard record dropped: 20 trajectories
 * unaccounted in the 60-minute point-9 soak) and while a run loaded its state by reference (reports then
 * went to the placeholder state and were lost).
 */
const CARRY_LATE_REPORTS_PATCH = 'campaign-carries-late-reports';
/** How often the campaign refreshes the live policy servers and settles children of earlier runs. */
const HOUSEKEEPING_MS = 30_000;
/** Scheduler shards (rollout.schedulerShards > 1) report finished groups at least this often… */
const SHARD_FLUSH_MS = 1_000;
/** …or as soon as this many are waiting (a report of 64 group summaries stays far below payload limits). */
const SHARD_MAX_BATCH = 64;
/**
 * A sharded group in flight this long is described (its shard may have died with it queued or running).
 * Longer than any group's life at OSWorld latency with a 3–4× episode queue; a group still running is
 * left alone.
 */
const SHARDED_GROUP_RECONCILE_AFTER_MS = 15 * 60_000;
/** Housekeeping's policy-server listing as a regular activity (refreshEndpoints says why). */
const HOUSEKEEPING_ACTIVITY_PATCH = 'campaign-housekeeping-regular-activity';
/**
 * A full buffer drops the groups no train step could use first (trimBuffer). Runs recorded before this
 * change dropped the oldest groups whatever they held, and train steps started on other batches.
 */
const TRIM_UNTRAINABLE_FIRST_PATCH = 'campaign-buffer-trims-untrainable-first';
/**
 * Curation reads each reward as its success indicator (campaign-state.ts CurationMode). Runs recorded
 * before it curated on raw rewards and skipped MiniWoB's mostly-failed groups.
 */
const CURATE_ON_SUCCESS_PATCH = 'campaign-curation-reads-success';
/** An evaluation that meets the target is confirmed on the next served version (campaign-loop.ts confirmingTarget). */
const CONFIRM_TARGET_EARLY_PATCH = 'campaign-confirm-target-early';
/**
 * The behaviour-cloned version is evaluated at once even under sparse evaluations (eval.sparseEveryVersions):
 * it is the RL start point. Runs recorded before this change waited eval.everyVersions only, so with sparse
 * evaluations the BC version went unevaluated and the first RL evaluation stood in for it.
 */
const BC_START_EVALUATED_PATCH = 'campaign-bc-start-evaluated';
/**
 * Discard records go out through one writer at a time that takes everything queued (at most
 * DISCARD_WRITE_BATCH entries per recordDiscards), each entry stamped with the head it was decided at. Runs
 * recorded before this change chained one recordDiscards per loop iteration: under load the chain fell
 * behind and continue-as-new waited for all of it (≈ 33 s with no new groups in the 512-env scale bench).
 */
const COALESCED_DISCARDS_PATCH = 'campaign-coalesced-discard-writes';
/**
 * The warm start runs exactly the demonstration groups it asked for. Its lanes test `next < groups` before
 * waiting out a pause and take a group number after it, so lanes that waited together take numbers past the
 * last group (always when there are more lanes than groups). Runs recorded before this change ran those as
 * extra groups on task `i % tasks` (since policy.bcTaskWeights they failed their workflow task instead).
 */
const WARM_START_EXACT_GROUPS_PATCH = 'campaign-warm-start-exact-groups';
const DISCARD_WRITE_BATCH = 256;
/** A child of an earlier run is described only after it had this long to report by itself. */
const RECONCILE_AFTER_MS = 60_000;

export async function campaignWorkflow(input: CampaignInput): Promise<CampaignResult> {
  const config = CampaignConfigSchema.parse(input.config);
  const wfId = workflowInfo().workflowId;
  // Until the suite is prepared (first run) or the carried state is loaded (by reference), a placeholder
  // answers queries and records pause/stop, so every handler is registered before the first await.
  let s: CampaignState = input.state
    ? loadCarriedState(input.state)
    : initialCampaignState({
        campaignId: config.campaign.id,
        config,
        tasks: [],
        heldOut: [],
        startedAtMs: Date.now(),
        initialVersion: 0,
      });
  let ready = input.state !== undefined;
  const carryLate = patched(CARRY_LATE_REPORTS_PATCH);
  const trimUntrainableFirst = patched(TRIM_UNTRAINABLE_FIRST_PATCH);
  const successRewards = patched(CURATE_ON_SUCCESS_PATCH);
  const confirmTargetEarly = patched(CONFIRM_TARGET_EARLY_PATCH);
  /** Set once continue-as-new has begun: from then on reports are carried to the next run, not applied. */
  let closing = false;
  const late: LateReport[] = [];
  /** True when the report was held back (the state is not live: loading, or handed to the next run). */
  const heldBack = (r: LateReport): boolean => {
    if (!carryLate || (ready && !closing)) return false;
    late.push(r);
    return true;
  };
  let dirty = true;
  const wake = () => {
    dirty = true;
  };

  // ---- discard records: why completed trajectories were not trained on (with the ledger, every
  // trajectory is accounted for; cli/lineage.ts). Written by the data manager, in order, off the hot path.
  let discardQueue: DiscardEntry[] = [];
  let discardWrites: Promise<unknown> = Promise.resolve();
  const discardWriter = patched(COALESCED_DISCARDS_PATCH)
    ? new CoalescingWriter<DiscardEntry>(async (entries) => {
        await data
          .recordDiscards({
            campaignId: s.campaignId,
            policyVersion: s.policyVersion,
            trainStep: s.trainSteps,
            entries,
          })
          .catch((err: unknown) => log.warn('discard records not written', { error: String(err) }));
      }, DISCARD_WRITE_BATCH)
    : null;
  const discard = (entries: DiscardEntry[]): void => {
    if (!discardWriter) discardQueue.push(...entries);
    else discardWriter.add(entries.map((e) => ({ ...e, policyVersion: s.policyVersion, trainStep: s.trainSteps })));
  };
  const flushDiscards = (): Promise<unknown> => {
    if (discardWriter) return discardWriter.flush();
    if (discardQueue.length === 0) return discardWrites;
    const entries = discardQueue;
    discardQueue = [];
    const at = { campaignId: s.campaignId, policyVersion: s.policyVersion, trainStep: s.trainSteps };
    discardWrites = discardWrites
      .then(() => data.recordDiscards({ ...at, entries }))
      .catch((err: unknown) => log.warn('discard records not written', { error: String(err) }));
    return discardWrites;
  };
  /** pruneStaleBuffer, recording the groups it drops (stale, or from an abandoned branch). */
  const prune = (): void => {
    const before = s.buffer;
    pruneStaleBuffer(s);
    const kept = new Set(s.buffer.map((g) => g.groupId));
    discard(
      groupDiscards(
        before.filter((g) => !kept.has(g.groupId)),
        'prune',
        'stale'
      )
    );
  };

  // ---- scheduler-shard bookkeeping the report handlers below touch (declared before any handler is
  // registered: signals buffered for a new run are delivered the moment their handler is set) -----------
  /** Which shard each sharded group in flight was assigned to (this run's assignments; not carried). */
  const assignedTo = new Map<string, number>();
  /**
   * Groups of a shard that ended: described at the next housekeeping (a group never started is lost at
   * once; one that finished while no shard took its report returned its summary as its result).
   */
  const suspects = new Set<string>();
  function forgetAssignment(groupId: string): void {
    assignedTo.delete(groupId);
    suspects.delete(groupId);
  }

  // ---- what children report (by signal, by their result watcher, or through describeChildren) -------
  function onGroupFinished(g: GroupSummary): void {
    if (heldBack({ kind: 'groupFinished', summary: g })) return;
    forgetAssignment(g.groupId);
    // Successes the group offered the pool; the pool keeps the newest k per task.
    const k = s.config.curation.precollectSuccessesPerTask;
    const added = Math.min(g.trajectories.filter((t) => !t.injectedFromPool && isSuccessReward(s, t.reward)).length, k);
    if (!recordGroup(s, g, s.config.curation.experiencePool ? added : 0, { successRewards })) return;
    discard(lostDiscards(g));
    discard(
      groupDiscards(trimBuffer(s, { untrainableFirst: trimUntrainableFirst, successRewards }), 'prune', 'buffer-full')
    );
    wake();
  }
  /** A group completed saying it signalled its summary: by then the signal has been applied. */
  function onGroupAcked(groupId: string): void {
    if (heldBack({ kind: 'groupAcked', groupId })) return;
    if (s.inFlight[groupId]) onGroupLost(groupId, 'completed and reported, but its report never arrived');
  }
  function onGroupLost(groupId: string, why: string): void {
    if (heldBack({ kind: 'groupLost', groupId, why })) return;
    forgetAssignment(groupId);
    const g = recordGroupLost(s, groupId);
    if (!g) return;
    log.warn('task group ended without reporting; its episodes count as lost', { groupId, why });
    discard(lostGroupDiscards(g));
    wake();
  }
  /** A scheduler shard's batch (rollout.schedulerShards > 1): the same as each group reporting by itself. */
  function onGroupsFinished(r: GroupsFinishedReport): void {
    for (const g of r.finished) onGroupFinished(g);
    for (const l of r.lost) onGroupLost(l.groupId, `${l.why} (reported by ${r.shardId})`);
  }
  function onTrainFinished(o: TrainStepOutcome): void {
    if (heldBack({ kind: 'trainFinished', outcome: o })) return;
    const train = s.train;
    if (!train || train.workflowId !== o.workflowId) return; // a duplicate report
    s.train = null;
    if (o.ok && o.version !== undefined) {
      if (adoptTrainedVersion(s, { version: o.version, fromVersion: train.fromVersion }) === 'adopted') prune();
      else log.warn('trained version abandoned: the head moved while it trained', { version: o.version });
    } else {
      log.error('train step failed; keeping the previous checkpoint', { trainStep: o.trainStep, error: o.error });
      discard(failedStepDiscards(train.groups));
    }
    wake();
  }
  function onRolledOut(r: RolloutOutcome): void {
    if (heldBack({ kind: 'rolledOut', outcome: r })) return;
    if (!s.rollout || s.rollout.version !== r.version) return;
    if (applyRolloutOutcome(s, r) === 'rolled-back') {
      log.warn('model rollout rolled back', { version: r.version, trainingFrom: s.policyVersion, reason: r.reason });
      prune();
    }
    wake();
  }
  function onRolloutLost(version: number, why: string): void {
    if (heldBack({ kind: 'rolloutLost', version, why })) return;
    if (!s.rollout || s.rollout.version !== version) return;
    // The rollout child ended without a result: what the servers serve is unknown, so roll the head out again.
    log.warn('model rollout ended without reporting; rolling the head out again', { version, why });
    s.rollout = null;
    if (s.pendingRollout === null) s.pendingRollout = s.policyVersion;
    wake();
  }
  function onEvalFinished(p: EvalPoint): void {
    if (heldBack({ kind: 'evalFinished', point: p })) return;
    if (!s.evaluation) return;
    s.evaluation = null;
    recordEval(s, p);
    wake();
  }
  function onEvalLost(why: string): void {
    if (heldBack({ kind: 'evalLost', why })) return;
    if (!s.evaluation) return;
    log.warn('evaluation ended without reporting', { why });
    s.evaluation = null;
    wake();
  }

  function applyLate(r: LateReport): void {
    if (r.kind === 'groupFinished') onGroupFinished(r.summary);
    else if (r.kind === 'groupAcked') onGroupAcked(r.groupId);
    else if (r.kind === 'groupLost') onGroupLost(r.groupId, r.why);
    else if (r.kind === 'trainFinished') onTrainFinished(r.outcome);
    else if (r.kind === 'rolledOut') onRolledOut(r.outcome);
    else if (r.kind === 'rolloutLost') onRolloutLost(r.version, r.why);
    else if (r.kind === 'evalFinished') onEvalFinished(r.point);
    else onEvalLost(r.why);
  }

  // ---- control plane (thin handlers: record the request, wake the loop) -------------------------------
  setHandler(statusQuery, () => campaignStatus(s));
  setHandler(taskStatsQuery, () => Object.values(s.stats));
  setHandler(groupFinishedSignal, onGroupFinished);
  setHandler(groupsFinishedSignal, onGroupsFinished);
  setHandler(evalFinishedSignal, onEvalFinished);
  setHandler(modelRolledOutSignal, onRolledOut);
  setHandler(trainStepFinishedSignal, onTrainFinished);
  setHandler(pauseUpdate, () => {
    s.paused = true;
    publish();
    wake();
    return campaignStatus(s);
  });
  setHandler(resumeUpdate, () => {
    s.paused = false;
    publish();
    wake();
    return campaignStatus(s);
  });
  setHandler(stopUpdate, () => {
    s.stopRequested = true;
    wake();
    return campaignStatus(s);
  });
  setHandler(
    setConfigUpdate,
    (u) => {
      s.config = applyLiveOverrides(s.config, u.overrides);
      wake();
      return campaignStatus(s);
    },
    { validator: (u) => void applyLiveOverrides(s.config, u.overrides) }
  );
  setHandler(
    quarantineTaskUpdate,
    (u) => {
      const st = s.stats[u.taskId]!;
      st.quarantined = u.quarantined;
      wake();
      return st;
    },
    {
      validator: (u) => {
        if (!s.stats[u.taskId])
          throw new Error(`unknown task "${u.taskId}" (known: ${Object.keys(s.stats).join(', ')})`);
        if (u.quarantined && s.tasks.filter((t) => !s.stats[t.id]?.quarantined && t.id !== u.taskId).length === 0) {
          throw new Error('cannot quarantine the last active task');
        }
      },
    }
  );
  setHandler(
    injectSuccessUpdate,
    async (u) => {
      await data.injectSuccess({ campaignId: s.campaignId, taskId: u.taskId, manifestKey: u.manifestKey });
      const st = s.stats[u.taskId]!;
      st.poolSize = Math.min(s.config.curation.precollectSuccessesPerTask, st.poolSize + 1);
      return st;
    },
    {
      validator: (u) => {
        if (!s.stats[u.taskId]) throw new Error(`unknown task "${u.taskId}"`);
        if (!u.manifestKey.endsWith('manifest.json'))
          throw new Error('manifestKey must be a trajectory manifest key (…/manifest.json)');
      },
    }
  );
  setHandler(
    pinCheckpointUpdate,
    (u) => {
      s.pinnedVersion = u.version;
      if (u.version !== null && u.version !== s.policyVersion) {
        // A manual rollback: serve the pinned version and train on from it. Versions trained from the old
        // head are abandoned along the lineage (their data is never trained into the pinned line).
        s.policyVersion = u.version;
        s.pendingRollout = u.version;
        s.abandonedVersions++;
        prune();
      }
      wake();
      return campaignStatus(s);
    },
    {
      validator: (u) => {
        const known = Math.max(s.policyVersion, ...Object.keys(s.lineage).map(Number));
        if (u.version !== null && (!Number.isInteger(u.version) || u.version < 0 || u.version > known)) {
          throw new Error(`version must be an existing checkpoint between 0 and ${known}`);
        }
        if (u.version !== null && s.lineage[String(u.version)] === undefined && u.version !== s.policyVersion) {
          throw new Error(
            `v${u.version} is not in this campaign's recent lineage (known: ${Object.keys(s.lineage).join(', ')})`
          );
        }
      },
    }
  );

  // ---- visibility: search attributes only when they change (each upsert is a history event) ----------
  let published = '';
  function publish(): void {
    const st = campaignStatus(s);
    const attrs = {
      version: s.policyVersion,
      success: Math.round((st.lastEval?.successRate ?? st.recentSuccessRate) * 1000) / 1000,
      phase: st.phase,
    };
    const key = JSON.stringify(attrs);
    if (key !== published) {
      published = key;
      upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.campaignId, value: s.campaignId },
        { key: SEARCH_ATTRIBUTES.policyVersion, value: attrs.version },
        { key: SEARCH_ATTRIBUTES.successRate, value: attrs.success },
        { key: SEARCH_ATTRIBUTES.state, value: attrs.phase },
      ]);
    }
    setCurrentDetails(
      [
        `**Campaign** \`${s.campaignId}\` (${s.config.campaign.mode}) — **${st.phase}**`,
        `- policy version **v${s.policyVersion}**, served: ${
          Object.entries(s.servedVersions)
            .map(([k, v]) => `${k}=v${v}`)
            .join(', ') || '—'
        }${s.pendingRollout !== null ? `, waiting to roll out v${s.pendingRollout}` : ''}`,
        `- episodes ${s.episodes}, train steps ${s.trainSteps}/${s.config.campaign.maxTrainSteps}${
          s.train ? ` (step ${s.train.trainStep} running)` : ''
        }, groups in flight ${st.groupsInFlight}, buffered ${st.bufferedGroups}`,
        `- recent rollout success ${(st.recentSuccessRate * 100).toFixed(1)}%, held-out ${st.lastEval ? `${(st.lastEval.successRate * 100).toFixed(1)}% @v${st.lastEval.version}` : '—'}`,
        `- infra failures ${s.infraFailures} (never recorded as reward), rollbacks ${s.rolledBack}, abandoned versions ${s.abandonedVersions}, run ${s.runIndex}`,
      ].join('\n')
    );
  }

  // ---- carrying actions out ---------------------------------------------------------------------------
  const policyKind = () => (s.config.policy.kind === 'vlm' ? 'uitars' : 'embedded');
  /**
   * A VLM campaign's UI-TARS episode options: the model its vLLM servers serve (policy.vlmModel; dartflow's
   * vLLM workers serve "dartflow") and policy.options (logitBias, maxTokens, pixel bounds, coordModel, …),
   * the same for its episodes, demonstrations, pre-collection, evaluations and rollout gates.
   */
  const policyOptions = (): Record<string, unknown> =>
    s.config.policy.kind === 'vlm'
      ? { model: s.config.policy.vlmModel ?? 'dartflow', ...(s.config.policy.options ?? {}) }
      : {};
  /** env.episodeHeartbeatTimeoutSeconds for every episode activity the campaign's children run. */
  const episodeHeartbeatMs = (): number => s.config.env.episodeHeartbeatTimeoutSeconds * 1000;

  /**
   * Starts an ABANDON child on the orchestrator queue and watches its result: `onResult` with what it
   * returns, `onLost` when it fails, is terminated or times out (or cannot start). Children of earlier
   * runs cannot be watched from here; `reconcile` settles those.
   */
  async function startWatched<W extends Workflow>(
    workflow: W,
    workflowId: string,
    args: Parameters<W>,
    onResult: (r: Awaited<ReturnType<W>>) => void,
    onLost: (why: string) => void
  ): Promise<void> {
    try {
      const handle = await startChild(workflow, {
        workflowId,
        taskQueue: TASK_QUEUES.orchestrator,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        args,
        // `args` is typed by this function's signature; startChild's conditional options type cannot see
        // that through the generic W, hence the cast.
      } as unknown as WithWorkflowArgs<W, Omit<ChildWorkflowOptions, 'typeInfo'> & { typeInfo?: undefined }>);
      void handle.result().then(
        (r) => onResult(r as Awaited<ReturnType<W>>),
        (err: unknown) => onLost(String(err))
      );
    } catch (err) {
      onLost(`could not start: ${String(err)}`);
    }
  }

  function groupInput(plan: GroupPlan): TaskGroupInput {
    return {
      campaignId: s.campaignId,
      parentWorkflowId: wfId,
      groupId: plan.groupId,
      task: plan.task.spec,
      seed: plan.seed,
      n: plan.n,
      maxSteps: plan.maxSteps,
      policy: {
        kind: policyKind(),
        endpoints: s.endpoints.map((e) => e.url),
        temperature: s.config.rollout.temperature,
        versionHint: s.policyVersion,
        options: policyOptions(),
      },
      // Look a pooled success up only when the pool holds one for this task (saves a MinIO list and
      // a local activity per all-failed group while the pool is still empty).
      experiencePool: s.config.curation.experiencePool && (s.stats[plan.task.id]?.poolSize ?? 0) > 0,
      poolWanted: plan.poolWanted,
      ...groupPoolOptions(s.config),
      successThreshold: s.config.campaign.successThreshold,
      episodeHeartbeatTimeoutMs: episodeHeartbeatMs(),
    };
  }

  async function startGroup(plan: GroupPlan): Promise<void> {
    // The group reports by signal; its result is a small ack then (the summary only if the signal failed).
    await startWatched(
      taskGroupWorkflow,
      plan.groupId,
      [groupInput(plan)],
      (r) => (isGroupSummary(r) ? onGroupFinished(r) : onGroupAcked(r.groupId)),
      (why) => onGroupLost(plan.groupId, why)
    );
  }

  // ---- scheduler shards (rollout.schedulerShards > 1; workflows/rollout-shard.ts) -----------------------
  const shardCount = (): number => s.config.rollout.schedulerShards;
  const shardId = (i: number): string => `${wfId}-shard-${i}`;
  /** Per shard: started or found running by this run (false: start it before the next assignment). */
  const shardUp: boolean[] = [];
  /** Per shard: this run watches its result (a shard found running from an earlier run is described). */
  const shardWatched: boolean[] = [];
  let nextShard = 0;

  async function startShard(i: number): Promise<void> {
    try {
      const handle = await startChild(rolloutShardWorkflow, {
        workflowId: shardId(i),
        taskQueue: TASK_QUEUES.orchestrator,
        parentClosePolicy: ParentClosePolicy.ABANDON,
        args: [
          {
            campaignId: s.campaignId,
            campaignWorkflowId: wfId,
            flushMs: SHARD_FLUSH_MS,
            maxBatch: SHARD_MAX_BATCH,
            continueAsNewAfterIterations: input.shardContinueAsNewAfterIterations,
            laneEpisodes: input.shardLaneEpisodes,
          },
        ],
      });
      shardUp[i] = true;
      shardWatched[i] = true;
      void handle.result().then(
        () => shardDown(i, 'completed'),
        (err: unknown) => shardDown(i, String(err))
      );
    } catch (err) {
      // Started by an earlier run (continue-as-new) and still running: use it, and describe it at housekeeping.
      if (/already started|AlreadyStarted/i.test(String(err))) {
        shardUp[i] = true;
        shardWatched[i] = false;
      } else
        log.warn('scheduler shard could not start; retried at the next tick', {
          shard: shardId(i),
          error: String(err),
        });
    }
  }
  function shardDown(i: number, why: string): void {
    if (!shardUp[i]) return;
    shardUp[i] = false;
    for (const [groupId, shard] of assignedTo) if (shard === i) suspects.add(groupId);
    if (!s.stopRequested) log.warn('scheduler shard ended; starting it again', { shard: shardId(i), why });
    wake();
  }
  async function ensureShards(): Promise<void> {
    const down = Array.from({ length: shardCount() }, (_, i) => i).filter((i) => !shardUp[i]);
    await Promise.all(down.map((i) => startShard(i)));
  }
  /** Shards of earlier runs cannot be watched from here: ask whether they still run. */
  async function settleSuspects(): Promise<void> {
    for (const id of suspects) if (!s.inFlight[id]) suspects.delete(id);
    if (suspects.size === 0) return;
    for (const d of await children.describeChildren({ workflowIds: [...suspects] })) {
      if (d.status !== 'RUNNING') suspects.delete(d.workflowId);
      settle(d);
    }
  }
  async function checkUnwatchedShards(): Promise<void> {
    const ids = Array.from({ length: shardCount() }, (_, i) => i).filter((i) => shardUp[i] && !shardWatched[i]);
    if (ids.length === 0) return;
    for (const d of await children.describeChildren({ workflowIds: ids.map(shardId) }))
      if (d.status !== 'RUNNING') shardDown(Number(d.workflowId.slice(d.workflowId.lastIndexOf('-') + 1)), d.status);
  }
  /** One assignGroups signal per shard per tick, groups dealt round-robin over the shards. */
  function assignGroups(plans: GroupPlan[]): Promise<void> {
    const perShard = new Map<number, GroupPlan[]>();
    for (const plan of plans) {
      const i = nextShard++ % shardCount();
      perShard.set(i, [...(perShard.get(i) ?? []), plan]);
      assignedTo.set(plan.groupId, i);
    }
    return Promise.all(
      [...perShard].map(async ([i, batch]) => {
        try {
          if (!shardUp[i]) throw new Error('the shard is down');
          await getExternalWorkflowHandle(shardId(i)).signal(assignGroupsSignal, batch.map(groupInput));
        } catch (err) {
          shardDown(i, String(err));
          for (const plan of batch) onGroupLost(plan.groupId, `not assigned to ${shardId(i)}: ${String(err)}`);
        }
      })
    ).then(() => undefined);
  }

  async function startTrainStep(a: Extract<CampaignAction, { kind: 'startTrainStep' }>): Promise<void> {
    const lost = (why: string): void =>
      onTrainFinished({
        workflowId: a.workflowId,
        trainStep: a.trainStep,
        fromVersion: a.fromVersion,
        ok: false,
        error: why,
      });
    await startWatched(
      trainStepWorkflow,
      a.workflowId,
      [
        {
          parentWorkflowId: wfId,
          train: {
            campaignId: s.campaignId,
            trainStep: a.trainStep,
            fromVersion: a.fromVersion,
            groups: a.batch.groups,
            trainer: s.config.trainer,
            maxStaleness: s.config.curation.maxStaleness,
            allowedVersions: a.batch.allowedVersions,
            referenceVersion: s.referenceVersion,
            policy: trainerPolicyOf(s.config),
            minStepMs: simulatedTrainStepMs(s.config),
          },
          // A VLM campaign trains on the Python trainer's queue (activity options: no patch needed).
          ...(s.config.policy.kind === 'vlm' ? { trainerQueue: trainerQueueOf('vlm') } : {}),
        },
      ],
      onTrainFinished,
      lost
    );
  }

  function gateFor(version: number) {
    const last = s.evals.at(-1);
    const every = s.config.eval.gateEveryVersions;
    if (s.config.campaign.mode === 'sync') return null;
    if (!last || s.heldOut.length === 0 || every === 0 || version % every !== 0) return null;
    return {
      tasks: s.heldOut.map((t) => t.spec),
      episodesPerTask: s.config.eval.gateEpisodesPerTask,
      baseline: last.successRate,
      maxDrop: s.config.eval.gateMinSuccessDrop,
      episodeHeartbeatTimeoutMs: episodeHeartbeatMs(),
    };
  }

  async function startRollout(a: Extract<CampaignAction, { kind: 'startRollout' }>): Promise<void> {
    await startWatched(
      modelRolloutWorkflow,
      a.workflowId,
      [
        {
          campaignId: s.campaignId,
          parentWorkflowId: wfId,
          version: a.version,
          servers: s.endpoints,
          servedVersions: s.servedVersions,
          gate: gateFor(a.version),
          policyKind: policyKind(),
          policyOptions: policyOptions(),
          reloadPickupTimeoutMs: s.config.policy.reloadPickupTimeoutSeconds * 1000,
        },
      ],
      onRolledOut,
      (why) => onRolloutLost(a.version, why)
    );
  }

  async function startEvaluation(a: Extract<CampaignAction, { kind: 'startEval' }>): Promise<void> {
    await startWatched(
      evaluateWorkflow,
      a.workflowId,
      [
        {
          campaignId: s.campaignId,
          parentWorkflowId: wfId,
          version: a.version,
          tasks: s.heldOut.map((t) => t.spec),
          episodesPerTask: s.config.eval.episodesPerTask,
          ...(s.config.eval.sampledEpisodesPerTask !== null
            ? { sampledEpisodesPerTask: s.config.eval.sampledEpisodesPerTask }
            : {}),
          endpoints: s.endpoints.map((e) => e.url),
          policyKind: policyKind(),
          policyOptions: policyOptions(),
          atEpisodes: s.episodes,
          startedAtMs: s.startedAtMs,
          successThreshold: s.config.campaign.successThreshold,
          episodeHeartbeatTimeoutMs: episodeHeartbeatMs(),
        },
      ],
      onEvalFinished,
      onEvalLost
    );
  }

  /** Carries out the decisions of one tick; all child starts go out in one workflow task. */
  /**
   * Child starts not yet acknowledged by the server. The loop does not wait for them (under load a start
   * takes seconds, and finished groups must be replaced meanwhile); continue-as-new and completion do.
   */
  const pendingStarts = new Set<Promise<void>>();
  const allStarted = async (): Promise<void> => {
    while (pendingStarts.size > 0) await Promise.all([...pendingStarts]);
  };

  /** Carries out the decisions of one tick; all child starts of a tick go out in one workflow task. */
  function execute(actions: CampaignAction[]): Promise<void> {
    const starts: Array<Promise<void>> = [];
    for (const a of actions) {
      if (a.kind === 'startGroups') {
        if (shardCount() > 1) starts.push(assignGroups(a.plans));
        else for (const plan of a.plans) starts.push(startGroup(plan));
      } else if (a.kind === 'startTrainStep' || a.kind === 'dropBatch') {
        // What the step leaves out of the groups it took (the head is still the step's fromVersion here).
        discard(batchDiscards(a.taken, a.batch, (t) => !isTrainable(s, t)));
        if (a.kind === 'startTrainStep') starts.push(startTrainStep(a));
      } else if (a.kind === 'startRollout') starts.push(startRollout(a));
      else if (a.kind === 'startEval') starts.push(startEvaluation(a));
    }
    const all = Promise.all(starts).then(() => undefined);
    pendingStarts.add(all);
    void all.finally(() => pendingStarts.delete(all));
    return all;
  }

  // ---- housekeeping: live policy servers, children that ended without reporting ------------------------
  async function refreshEndpoints(): Promise<void> {
    // A regular activity, not a local one (runs recorded before this change used one): a local activity
    // that completes while an overloaded worker's workflow task is being heartbeated gets its marker into
    // one workflow task and the code after it into the next, and a replay from history then runs that
    // code a task early — a non-determinism error seen in the point-9 soak (docs/reliability.md).
    const live = patched(HOUSEKEEPING_ACTIVITY_PATCH)
      ? await dataActivities.listPolicyServers({})
      : await dataLocalActivities.listPolicyServers({});
    const before = s.endpoints.map((e) => e.serverId).join(',');
    setEndpoints(s, live);
    if (s.endpoints.map((e) => e.serverId).join(',') !== before) {
      log.info('policy servers changed', { servers: s.endpoints.map((e) => e.serverId) });
      // A server that joined (or came back) serves whatever it loaded last: roll the head out to it.
      const unserved = s.endpoints.some((e) => s.servedVersions[e.serverId] === undefined);
      if (unserved && !s.rollout && s.pendingRollout === null && ready) s.pendingRollout = s.policyVersion;
      wake();
    }
  }

  function settle(d: ChildDescription): void {
    if (d.status === 'RUNNING') return;
    const ok = d.status === 'COMPLETED';
    if (s.inFlight[d.workflowId]) {
      const r = d.result as GroupSummary | GroupReported;
      if (ok) {
        if (isGroupSummary(r)) onGroupFinished(r);
        else onGroupAcked(r.groupId);
      } else onGroupLost(d.workflowId, d.status);
    } else if (s.train?.workflowId === d.workflowId) {
      if (ok) onTrainFinished(d.result as TrainStepOutcome);
      else onTrainFinished({ ...s.train, workflowId: d.workflowId, ok: false, error: d.status });
    } else if (s.rollout?.workflowId === d.workflowId) {
      if (ok) onRolledOut(d.result as ModelRolloutResult);
      else onRolloutLost(s.rollout.version, d.status);
    } else if (s.evaluation?.workflowId === d.workflowId) {
      if (ok) onEvalFinished(d.result as EvalPoint);
      else onEvalLost(d.status);
    }
  }

  /** Children started by earlier runs cannot be watched from this run: ask what became of them. */
  async function reconcile(): Promise<void> {
    const now = Date.now();
    const old = (c: { run: number; startedAtMs: number }) =>
      c.run < s.runIndex && now - c.startedAtMs > RECONCILE_AFTER_MS;
    // Sharded groups are never watched by the campaign: a long-silent one may have died with its shard.
    const oldGroup = (g: { run: number; startedAtMs: number }) =>
      old(g) || (shardCount() > 1 && now - g.startedAtMs > SHARDED_GROUP_RECONCILE_AFTER_MS);
    const ids = [
      ...[s.train, s.rollout, s.evaluation].filter((c): c is NonNullable<typeof c> => c !== null && old(c)),
      ...Object.values(s.inFlight)
        .filter(oldGroup)
        .map((g) => ({ workflowId: g.groupId })),
    ].map((c) => c.workflowId);
    if (ids.length === 0) return;
    // A sharded group runs in a lane of its shard, not as a workflow of its own: its shard says it holds it.
    const heldBy = shardCount() > 1 ? Array.from({ length: shardCount() }, (_, i) => shardId(i)) : undefined;
    for (const d of await children.describeChildren({ workflowIds: ids, ...(heldBy ? { heldBy } : {}) })) settle(d);
  }

  let housekeepingDue = false;
  let housekeepingTimer = false;
  /** One timer per housekeeping period (not one per loop iteration: each timer costs history events). */
  function scheduleHousekeeping(): void {
    if (housekeepingTimer) return;
    housekeepingTimer = true;
    void sleep(HOUSEKEEPING_MS).then(() => {
      housekeepingTimer = false;
      housekeepingDue = true;
      wake();
    });
  }
  let housekeepings = 0;
  async function housekeeping(): Promise<void> {
    housekeepingDue = false;
    await refreshEndpoints();
    if (shardCount() > 1) {
      await checkUnwatchedShards();
      await settleSuspects();
    }
    // Settling children of earlier runs every other period is enough (they usually report by themselves).
    if (housekeepings++ % 2 === 0) await reconcile();
  }

  // ---- behaviour-cloning warm start (DART starts RL from an SFT model) ---------------------------------
  /** Oracle demonstrations on train seeds through the env workers (UI-TARS turns for a VLM), then one behaviourClone step. */
  async function warmStart(): Promise<void> {
    const want = s.config.policy.bcWarmStartEpisodes;
    const perGroup = 8;
    const groups = Math.ceil(want / perGroup);
    const lanes = Math.max(1, Math.floor(s.config.rollout.envConcurrency / perGroup));
    const demos: GroupSummary[] = [];
    const taskOrder = demoTaskOrder(
      s.tasks.map((t) => t.id),
      s.config.policy.bcTaskWeights,
      groups
    );
    let next = 0;
    const lane = async () => {
      while (next < groups && !s.stopRequested) {
        await condition(() => !s.paused || s.stopRequested);
        const i = next++;
        if (i >= groups && patched(WARM_START_EXACT_GROUPS_PATCH)) break;
        const task = s.tasks[taskOrder[i] ?? i % s.tasks.length]!;
        const groupId = `${s.campaignId}-demo${String(i).padStart(5, '0')}`;
        const span = task.trainSeeds.to - task.trainSeeds.from - perGroup;
        demos.push(
          groupSummaryOf(
            await executeChild(taskGroupWorkflow, {
              workflowId: groupId,
              taskQueue: TASK_QUEUES.orchestrator,
              args: [
                {
                  campaignId: s.campaignId,
                  groupId,
                  task: task.spec,
                  seed: task.trainSeeds.from + ((i * 104729) % Math.max(1, span)),
                  n: perGroup,
                  maxSteps: task.maxSteps,
                  // A VLM learns from UI-TARS turns with their prompt records (vlm/uitars-oracle-policy.ts);
                  // only the child's input changes, so replay needs no patch.
                  policy:
                    s.config.policy.kind === 'vlm'
                      ? { kind: 'uitars-oracle', endpoints: [], temperature: 1, options: policyOptions() }
                      : { kind: 'oracle', endpoints: [], temperature: 1 },
                  experiencePool: false,
                  poolWanted: 0,
                  source: 'demo',
                  distinctSeeds: true,
                  episodeHeartbeatTimeoutMs: episodeHeartbeatMs(),
                },
              ],
            })
          )
        );
        publish();
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    if (s.stopRequested) return;
    const refs = demos
      .map((g) => ({
        groupId: g.groupId,
        taskId: g.taskId,
        trajectories: g.trajectories
          .filter((t) => isSuccessReward(s, t.reward))
          .map((t) => ({
            trajectoryId: t.trajectoryId,
            manifestKey: t.manifestKey,
            reward: t.reward ?? 0,
            injectedFromPool: false,
          })),
      }))
      .filter((g) => g.trajectories.length > 0);
    const result = await trainerActivitiesOn(
      trainerQueueOf(s.config.policy.kind),
      trainerHeartbeatMs(s.config.trainer)
    ).behaviourClone({
      campaignId: s.campaignId,
      trainStep: s.trainSteps + 1,
      fromVersion: s.policyVersion,
      demos: refs,
      epochs: s.config.policy.bcEpochs,
      learningRate: s.config.trainer.learningRate,
      minibatchSize: s.config.trainer.minibatchSize,
      policy: trainerPolicyOf(s.config),
    });
    addVersion(s.lineage, result.version, s.policyVersion);
    s.trainSteps++;
    s.policyVersion = result.version;
    s.referenceVersion = result.version;
    s.pendingRollout = result.version;
  }

  // ---- pre-collection (DART §4.8, curation.precollect) ---------------------------------------------------
  /**
   * Fills each task's experience pool up to curation.precollectSuccessesPerTask successes before RL, with
   * the demonstration policy of policy.kind (`uitars-oracle` for a VLM: its pooled successes carry prompt
   * records the Python trainer re-scores; `oracle` for the embedded CNN). An all-failed RL group then
   * trains with a pooled success in place of one of its failures instead of being dropped.
   */
  async function precollect(): Promise<void> {
    s.phase = 'precollecting';
    publish();
    const k = s.config.curation.precollectSuccessesPerTask;
    const active = s.tasks.filter((t) => !s.stats[t.id]?.quarantined);
    const result = await executeChild(precollectWorkflow, {
      workflowId: `${wfId}-precollect`,
      taskQueue: TASK_QUEUES.orchestrator,
      args: [
        {
          campaignId: s.campaignId,
          tasks: active.map((t) => t.spec),
          successesPerTask: k,
          maxAttemptsPerTask: s.config.curation.precollectMaxAttempts,
          policyKind: s.config.policy.kind === 'vlm' ? 'uitars-oracle' : 'oracle',
          policyOptions: policyOptions(),
          endpoints: [],
          temperature: 1,
          alreadyPooled: Object.fromEntries(active.map((t) => [t.id, s.stats[t.id]?.poolSize ?? 0])),
          successThreshold: s.config.campaign.successThreshold,
          ...groupPoolOptions(s.config),
          episodeHeartbeatTimeoutMs: episodeHeartbeatMs(),
        },
      ],
    });
    for (const [taskId, r] of Object.entries(result.perTask)) {
      const st = s.stats[taskId];
      if (st) st.poolSize = Math.min(k, Math.max(st.poolSize, r.successes));
      if (r.successes < k) log.warn('pre-collection left a task short of successes', { taskId, ...r, wanted: k });
    }
    s.phase = 'running';
    publish();
  }

  // ---- start: the first run prepares the suite; later runs may load their state by reference -----------
  if (input.stateRef) {
    const early = { paused: s.paused, stopRequested: s.stopRequested };
    s = loadCarriedState(await data.loadCampaignState(input.stateRef));
    s.paused ||= early.paused;
    s.stopRequested ||= early.stopRequested;
    ready = true;
  }
  if (!ready) {
    const prepared = await setup.prepareCampaign({ config });
    const early = { paused: s.paused, stopRequested: s.stopRequested };
    s = initialCampaignState({
      campaignId: config.campaign.id,
      config: s.config,
      tasks: prepared.tasks,
      heldOut: prepared.heldOut,
      startedAtMs: s.startedAtMs,
      initialVersion: prepared.initialVersion,
    });
    Object.assign(s, early);
    for (const [taskId, n] of Object.entries(prepared.poolSizes))
      if (s.stats[taskId]) s.stats[taskId].poolSize = Math.min(n, s.config.curation.precollectSuccessesPerTask);
    s.phase = 'running';
    ready = true;
  } else {
    s.runIndex++;
  }
  // The state is live now: apply what the previous run handed over, then what came while it loaded.
  if (carryLate) for (const r of [...(input.lateReports ?? []), ...late.splice(0)]) applyLate(r);
  publish();

  const firstRun = s.runIndex === 0 && s.trainSteps === 0;
  await refreshEndpoints();
  if (firstRun) {
    // The first model rollout must reach a server: rolled out to none, every episode would fail and no
    // train step (hence no later rollout) would ever come.
    while (s.endpoints.length === 0 && !s.stopRequested) {
      log.warn('no policy server registered yet; waiting');
      await condition(() => s.stopRequested, '2 seconds');
      await refreshEndpoints();
    }
    if (Object.keys(s.servedVersions).length === 0) s.pendingRollout = s.policyVersion;
    const rolled = (): Promise<boolean> => condition(() => s.rollout === null || s.stopRequested, '10 minutes');
    if (s.config.policy.bcWarmStartEpisodes > 0 && !s.stopRequested) {
      // v0 is rolled out and evaluated (the curve's first point) while the demonstrations run; then the
      // cloned version is rolled out before RL starts, and evaluated at once (the RL start point).
      s.phase = 'warm-start';
      publish();
      await execute([beginRollout(s, Date.now())].filter((a): a is CampaignAction => a !== null));
      await rolled();
      const served = Object.values(s.servedVersions)[0] ?? s.policyVersion;
      await execute([beginEval(s, Date.now(), served)].filter((a): a is CampaignAction => a !== null));
      await warmStart();
      await execute([beginRollout(s, Date.now())].filter((a): a is CampaignAction => a !== null));
      await rolled();
      const cadence = patched(BC_START_EVALUATED_PATCH)
        ? Math.max(s.config.eval.everyVersions, s.config.eval.sparseEveryVersions ?? 0)
        : s.config.eval.everyVersions;
      s.rolloutsSinceEval = Math.max(s.rolloutsSinceEval, cadence);
      s.phase = 'running';
    } else if (!s.stopRequested && patched('campaign-v0-served-before-rollouts')) {
      // Without a warm start too, v0 is served before the first group samples (a server with no model
      // would fail every episode of the first groups).
      await execute([beginRollout(s, Date.now())].filter((a): a is CampaignAction => a !== null));
      await rolled();
    }
    // A new child before the main loop: behind a patch (runs started earlier never pre-collected).
    if (s.config.curation.precollect && !s.stopRequested && patched('campaign-precollect-phase')) await precollect();
  }

  // ---- main loop: decide (pure), act, publish, sleep until something changes ---------------------------
  let iterations = 0;
  const continueAsNewDue = (n: number): boolean =>
    workflowInfo().continueAsNewSuggested ||
    (input.continueAsNewAfterIterations !== undefined && n >= input.continueAsNewAfterIterations);
  for (;;) {
    iterations++;
    if (housekeepingDue) await housekeeping();
    if (shardCount() > 1 && !s.stopRequested) await ensureShards();
    const actions = tick(s, {
      nowMs: Date.now(),
      continueAsNewDue: continueAsNewDue(iterations),
      successRewards,
      confirmTargetEarly,
    });
    // Runs recorded before this change awaited their child starts here (test/replay/histories).
    if (patched('campaign-nonblocking-child-starts')) void execute(actions);
    else await execute(actions);
    publish();
    void flushDiscards();
    if (actions.some((a) => a.kind === 'complete')) break;
    if (actions.some((a) => a.kind === 'continueAsNew')) {
      // Children run on and report to the next run by workflow id; their refs travel in the state.
      await allStarted();
      await condition(allHandlersFinished);
      // From here the state is handed over as it is: reports that come while the discards are written (or
      // the state is saved) go to the next run instead of changing a state that is already being carried.
      closing = carryLate;
      await flushDiscards();
      const carried =
        stateBytes(s) > STATE_INLINE_LIMIT_BYTES
          ? { stateRef: await data.saveCampaignState({ campaignId: s.campaignId, runIndex: s.runIndex, state: s }) }
          : { state: s };
      return continueAsNew<typeof campaignWorkflow>({
        config: s.config,
        ...carried,
        continueAsNewAfterIterations: input.continueAsNewAfterIterations,
        shardContinueAsNewAfterIterations: input.shardContinueAsNewAfterIterations,
        shardLaneEpisodes: input.shardLaneEpisodes,
        ...(carryLate && late.length > 0 ? { lateReports: late } : {}),
      });
    }
    scheduleHousekeeping();
    dirty = false;
    await condition(() => dirty);
  }

  await allStarted();
  // Scheduler shards drain what they run and end (best effort: one that is gone has nothing to drain).
  if (shardCount() > 1)
    await Promise.all(
      Array.from({ length: shardCount() }, (_, i) =>
        getExternalWorkflowHandle(shardId(i))
          .signal(stopShardSignal)
          .catch(() => undefined)
      )
    );
  // Groups still buffered were never trained on: record why, then make sure every record is written.
  discard(groupDiscards(s.buffer, 'stop', 'unused-at-stop'));
  await flushDiscards();
  publish();
  await condition(allHandlersFinished);
  if (s.evals.length === 0 && s.heldOut.length > 0)
    throw ApplicationFailure.nonRetryable('campaign finished without any evaluation');
  return {
    campaignId: s.campaignId,
    policyVersion: s.policyVersion,
    episodes: s.episodes,
    trainSteps: s.trainSteps,
    finalEval: s.evals.at(-1) ?? null,
    evals: s.evals,
    infraFailures: s.infraFailures,
    wallMs: Date.now() - s.startedAtMs,
  };
}
