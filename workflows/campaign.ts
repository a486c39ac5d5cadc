/**
 * campaignWorkflow — a DART training campaign (days long). Rollout-wise scheduling keeps env capacity
 * full (the next task group starts the moment one ends); train steps start whenever enough eligible
 * groups are buffered and overlap the rollouts (staleness bound per sample); every new checkpoint rolls
 * out server by server; held-out evaluations feed the learning curve. `mode: sync` runs the coupled
 * baseline (batch barrier → train → sync every server) through the same code.
 *
 * Durable by construction: state is carried across continue-as-new; task groups are ABANDON children
 * that signal the campaign by workflow id, so they survive both continue-as-new and worker crashes.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  executeChild,
  log,
  ParentClosePolicy,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createCampaignSetupActivities } from '../activities/data/campaign-setup';
import type { TrainStepResult } from '../activities/trainer/types';
import type { createTrainerActivities } from '../activities/trainer/train-step';
import { CampaignConfigSchema, type CampaignConfigInput } from '../schemas/config';
import { SEARCH_ATTRIBUTES } from '../schemas/search-attributes';
import { TASK_QUEUES } from '../schemas/task-queues';
import { dataActivities } from './activity-proxies';
import type { EvalPoint, GroupSummary, PolicyEndpoint } from '../schemas/campaign';
import { applyLiveOverrides } from './logic/live-config';
import { batchDiscards, failedStepDiscards, groupDiscards, lostDiscards, type DiscardEntry } from './logic/discards';
import {
  campaignStatus,
  initialCampaignState,
  markGroupStarted,
  planNextGroup,
  pruneStaleBuffer,
  recordEval,
  recordGroup,
  selectTrainBatch,
  shouldStop,
  simulatedTrainStepMs,
  takeFromBuffer,
  type CampaignState,
  type GroupPlan,
} from './logic/campaign-state';
import {
  evalFinishedSignal,
  groupFinishedSignal,
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
} from './messages';
import { evaluateWorkflow } from './evaluate';
import { modelRolloutWorkflow } from './model-rollout';
import { taskGroupWorkflow } from './task-group';

export interface CampaignInput {
  config: CampaignConfigInput;
  /** Carried by continue-as-new; absent on the first run. */
  state?: CampaignState;
  /** Test hook: continue-as-new after this many loop iterations (in addition to the server's suggestion). */
  continueAsNewAfterIterations?: number;
}

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
const data = dataActivities;
const trainer = proxyActivities<ReturnType<typeof createTrainerActivities>>({
  taskQueue: TASK_QUEUES.trainer,
  // A train step is seconds on the embedded policy; a heartbeat per minibatch detects a dead trainer fast
  // (a kill -9'd trainer holds training for this long before the step is retried elsewhere).
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: {
    initialInterval: '2 seconds',
    maximumInterval: '1 minute',
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['NonFiniteLossError', 'CheckpointMismatchError', 'InvalidTrainInput'],
  },
});

export async function campaignWorkflow(input: CampaignInput): Promise<CampaignResult> {
  const config = CampaignConfigSchema.parse(input.config);
  const wfId = workflowInfo().workflowId;
  let s: CampaignState;
  if (input.state) {
    s = input.state;
    s.runIndex++;
  } else {
    const prepared = await setup.prepareCampaign({ config });
    s = initialCampaignState({
      campaignId: config.campaign.id,
      config,
      tasks: prepared.tasks,
      heldOut: prepared.heldOut,
      startedAtMs: Date.now(),
      initialVersion: prepared.initialVersion,
    });
    for (const [taskId, n] of Object.entries(prepared.poolSizes)) if (s.stats[taskId]) s.stats[taskId].poolSize = n;
    s.phase = 'running';
  }
  let endpoints: PolicyEndpoint[] = [];
  let trainInFlight = false;
  let rolloutInFlight = false;
  /** A trained version waiting for the model rollout in flight to finish (async mode, no canary gate). */
  let pendingRollout: number | null = null;
  let evalInFlight = false;
  let dirty = true;
  const wake = () => {
    dirty = true;
  };

  // ---- discard records: why completed trajectories were not trained on (with the ledger, every
  // trajectory is accounted for; cli/lineage.ts). Written by the data manager, in order, off the hot path.
  const recordDiscards = patched('discard-records-v1');
  let discardQueue: DiscardEntry[] = [];
  let discardWrites: Promise<unknown> = Promise.resolve();
  const discard = (entries: DiscardEntry[]): void => {
    if (recordDiscards) discardQueue.push(...entries);
  };
  const flushDiscards = (): Promise<unknown> => {
    if (discardQueue.length === 0) return discardWrites;
    const entries = discardQueue;
    discardQueue = [];
    const at = { campaignId: s.campaignId, policyVersion: s.policyVersion, trainStep: s.trainSteps };
    discardWrites = discardWrites
      .then(() => data.recordDiscards({ ...at, entries }))
      .catch((err: unknown) => log.warn('discard records not written', { error: String(err) }));
    return discardWrites;
  };
  /** pruneStaleBuffer, recording the groups it drops. */
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

  // ---- control plane -------------------------------------------------------------------------------
  setHandler(statusQuery, () => campaignStatus(s, { trainInFlight }));
  setHandler(taskStatsQuery, () => Object.values(s.stats));
  setHandler(groupFinishedSignal, (g: GroupSummary) => {
    // Successes the group added to the pool are counted by their pool writes (bounded by poolWanted).
    const added = Math.min(
      g.trajectories.filter((t) => !t.injectedFromPool && (t.reward ?? 0) > 0).length,
      Math.max(0, s.config.curation.precollectSuccessesPerTask - (s.stats[g.taskId]?.poolSize ?? 0))
    );
    if (recordGroup(s, g, s.config.curation.experiencePool ? added : 0)) {
      discard(lostDiscards(g));
      wake();
    }
  });
  setHandler(evalFinishedSignal, (p: EvalPoint) => {
    recordEval(s, p);
    evalInFlight = false;
    wake();
  });
  setHandler(modelRolledOutSignal, (r) => {
    s.servedVersions = { ...r.servedVersions };
    rolloutInFlight = false;
    if (r.ok && !evalInFlight && r.version - Math.max(0, s.lastEvalVersion) >= s.config.eval.everyVersions) {
      // Evaluate once the new version is actually served, so the curve point measures that version.
      startEval(r.version);
    }
    if (!r.ok) {
      // The new version is abandoned: train on from what the servers still serve (the last good one).
      const served = Object.values(r.servedVersions);
      if (served.length > 0) s.policyVersion = Math.min(...served);
      s.rolledBack++;
      prune();
      log.warn('model rollout rolled back', { version: r.version, trainingFrom: s.policyVersion, reason: r.reason });
    }
    wake();
  });
  setHandler(pauseUpdate, () => {
    s.paused = true;
    wake();
    return campaignStatus(s);
  });
  setHandler(resumeUpdate, () => {
    s.paused = false;
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
      st.poolSize++;
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
    async (u) => {
      s.pinnedVersion = u.version;
      if (u.version !== null) {
        // Roll every server to the pinned version (a manual rollback) and train on from it.
        s.policyVersion = u.version;
        prune();
        await rollOut(u.version);
      }
      return campaignStatus(s);
    },
    {
      validator: (u) => {
        if (u.version !== null && (!Number.isInteger(u.version) || u.version < 0 || u.version > s.policyVersion)) {
          throw new Error(`version must be an existing checkpoint between 0 and ${s.policyVersion}`);
        }
      },
    }
  );

  // ---- the four moving parts ---------------------------------------------------------------------
  async function refreshEndpoints(): Promise<void> {
    endpoints = await data.listPolicyServers({});
    if (endpoints.length === 0) log.warn('no policy server registered yet; waiting');
  }

  async function startGroup(plan: GroupPlan): Promise<void> {
    markGroupStarted(s, plan, Date.now());
    await startChild(taskGroupWorkflow, {
      workflowId: plan.groupId,
      taskQueue: TASK_QUEUES.orchestrator,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [
        {
          campaignId: s.campaignId,
          parentWorkflowId: wfId,
          groupId: plan.groupId,
          task: plan.task.spec,
          seed: plan.seed,
          n: plan.n,
          maxSteps: plan.maxSteps,
          policy: {
            kind: s.config.policy.kind === 'vlm' ? 'uitars' : 'embedded',
            endpoints: endpoints.map((e) => e.url),
            temperature: s.config.rollout.temperature,
            versionHint: s.policyVersion,
          },
          // Look a pooled success up only when the pool holds one for this task (saves a MinIO list and a
          // local activity per all-failed group while the pool is still empty).
          experiencePool: s.config.curation.experiencePool && (s.stats[plan.task.id]?.poolSize ?? 0) > 0,
          poolWanted: plan.poolWanted,
        },
      ],
    });
  }

  async function rollOut(version: number): Promise<void> {
    rolloutInFlight = true;
    await startChild(modelRolloutWorkflow, {
      workflowId: `${s.campaignId}-rollout-v${version}-${s.runIndex}-${s.trainSteps}`,
      taskQueue: TASK_QUEUES.orchestrator,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [
        {
          campaignId: s.campaignId,
          parentWorkflowId: wfId,
          version,
          servers: endpoints,
          servedVersions: s.servedVersions,
          gate: s.config.campaign.mode === 'sync' ? null : gateFor(version),
        },
      ],
    });
  }

  function gateFor(version: number) {
    const last = s.evals.at(-1);
    const every = s.config.eval.gateEveryVersions;
    if (!last || s.heldOut.length === 0 || every === 0 || version % every !== 0) return null;
    return {
      tasks: s.heldOut.map((t) => t.spec),
      episodesPerTask: s.config.eval.gateEpisodesPerTask,
      baseline: last.successRate,
      maxDrop: s.config.eval.gateMinSuccessDrop,
    };
  }

  function startEval(version: number): void {
    if (s.heldOut.length === 0) return;
    evalInFlight = true;
    s.lastEvalVersion = version;
    void startChild(evaluateWorkflow, {
      workflowId: `${s.campaignId}-eval-v${version}-${s.runIndex}-${s.trainSteps}`,
      taskQueue: TASK_QUEUES.orchestrator,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      args: [
        {
          campaignId: s.campaignId,
          parentWorkflowId: wfId,
          version,
          tasks: s.heldOut.map((t) => t.spec),
          episodesPerTask: s.config.eval.episodesPerTask,
          endpoints: endpoints.map((e) => e.url),
          policyKind: s.config.policy.kind === 'vlm' ? 'uitars' : 'embedded',
          atEpisodes: s.episodes,
          startedAtMs: s.startedAtMs,
        },
      ],
    });
  }

  async function runTrainStep(minGroups?: number): Promise<TrainStepResult | null> {
    const batch = selectTrainBatch(s, { minGroups });
    if (!batch) return null;
    discard(batchDiscards(s.buffer, batch, s.policyVersion, s.config.curation.maxStaleness));
    takeFromBuffer(s, batch);
    trainInFlight = true;
    try {
      const result = await trainer.trainStep({
        campaignId: s.campaignId,
        trainStep: s.trainSteps + 1,
        fromVersion: s.policyVersion,
        groups: batch.groups,
        trainer: s.config.trainer,
        maxStaleness: s.config.curation.maxStaleness,
        referenceVersion: s.referenceVersion ?? 0,
        policy: { seed: s.config.policy.seed, width: s.config.policy.width },
        minStepMs: simulatedTrainStepMs(s.config),
      });
      s.trainSteps++;
      s.policyVersion = result.version;
      prune();
      return result;
    } catch (err) {
      // A refused step (NaN loss, bad batch) keeps the previous checkpoint; the campaign goes on.
      log.error('train step failed; keeping the previous checkpoint', { error: String(err) });
      discard(failedStepDiscards(batch));
      return null;
    } finally {
      trainInFlight = false;
      wake();
    }
  }

  function publish(): void {
    const st = campaignStatus(s);
    upsertSearchAttributes([
      { key: SEARCH_ATTRIBUTES.campaignId, value: s.campaignId },
      { key: SEARCH_ATTRIBUTES.policyVersion, value: s.policyVersion },
      { key: SEARCH_ATTRIBUTES.successRate, value: st.lastEval?.successRate ?? st.recentSuccessRate },
      { key: SEARCH_ATTRIBUTES.state, value: st.phase },
    ]);
    setCurrentDetails(
      [
        `**Campaign** \`${s.campaignId}\` (${s.config.campaign.mode}) — **${st.phase}**`,
        `- policy version **v${s.policyVersion}**, served: ${
          Object.entries(s.servedVersions)
            .map(([k, v]) => `${k}=v${v}`)
            .join(', ') || '—'
        }`,
        `- episodes ${s.episodes}, train steps ${s.trainSteps}/${s.config.campaign.maxTrainSteps}, groups in flight ${st.groupsInFlight}, buffered ${st.bufferedGroups}`,
        `- recent rollout success ${(st.recentSuccessRate * 100).toFixed(1)}%, held-out ${st.lastEval ? `${(st.lastEval.successRate * 100).toFixed(1)}% @v${st.lastEval.version}` : '—'}`,
        `- infra failures ${s.infraFailures} (never recorded as reward)`,
      ].join('\n')
    );
  }

  /**
   * Optional behaviour-cloning warm start (DART starts RL from an SFT model): oracle demonstrations on
   * train seeds through the env workers, then one behaviourClone step on the trainer → the next version.
   */
  async function warmStart(): Promise<void> {
    const want = s.config.policy.bcWarmStartEpisodes;
    const perGroup = 8;
    const groups = Math.ceil(want / perGroup);
    const lanes = Math.max(1, Math.floor(s.config.rollout.envConcurrency / perGroup));
    const demos: GroupSummary[] = [];
    let next = 0;
    const lane = async () => {
      while (next < groups) {
        const i = next++;
        const task = s.tasks[i % s.tasks.length]!;
        const groupId = `${s.campaignId}-demo${String(i).padStart(5, '0')}`;
        const span = task.trainSeeds.to - task.trainSeeds.from - perGroup;
        demos.push(
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
                policy: { kind: 'oracle', endpoints: [], temperature: 1 },
                experiencePool: false,
                poolWanted: 0,
                source: 'demo',
                distinctSeeds: true,
              },
            ],
          })
        );
        publish();
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    const refs = demos
      .map((g) => ({
        groupId: g.groupId,
        taskId: g.taskId,
        trajectories: g.trajectories
          .filter((t) => (t.reward ?? 0) > 0)
          .map((t) => ({
            trajectoryId: t.trajectoryId,
            manifestKey: t.manifestKey,
            reward: t.reward ?? 0,
            injectedFromPool: false,
          })),
      }))
      .filter((g) => g.trajectories.length > 0);
    const result = await trainer.behaviourClone({
      campaignId: s.campaignId,
      trainStep: s.trainSteps + 1,
      fromVersion: s.policyVersion,
      demos: refs,
      epochs: s.config.policy.bcEpochs,
      learningRate: s.config.trainer.learningRate,
      minibatchSize: s.config.trainer.minibatchSize,
      policy: { seed: s.config.policy.seed, width: s.config.policy.width },
    });
    s.trainSteps++;
    s.policyVersion = result.version;
    s.referenceVersion = result.version;
    s.phase = 'running';
  }

  // ---- main loop -------------------------------------------------------------------------------------
  await refreshEndpoints();
  if (s.runIndex === 0 && s.trainSteps === 0 && endpoints.length === 0 && patched('wait-for-policy-servers')) {
    // The first model rollout must reach a server: rolled out to none, every episode would fail and no
    // train step (hence no later rollout) would ever come.
    while (endpoints.length === 0 && !s.stopRequested) {
      await condition(() => s.stopRequested, '2 seconds');
      await refreshEndpoints();
    }
  }
  if (s.runIndex === 0 && s.trainSteps === 0) {
    if (Object.keys(s.servedVersions).length === 0) {
      await rollOut(s.policyVersion);
      await condition(() => !rolloutInFlight, '10 minutes');
    }
    startEval(s.policyVersion);
    if (s.config.policy.bcWarmStartEpisodes > 0) {
      s.phase = 'warm-start';
      publish();
      await warmStart();
      await condition(() => !evalInFlight);
      await rollOut(s.policyVersion);
      await condition(() => !rolloutInFlight, '10 minutes');
      startEval(s.policyVersion);
    }
  }
  let iterations = 0;
  const continueAsNewDue = (n: number): boolean =>
    workflowInfo().continueAsNewSuggested ||
    (input.continueAsNewAfterIterations !== undefined && n >= input.continueAsNewAfterIterations);
  const syncMode = s.config.campaign.mode === 'sync';

  while (!shouldStop(s)) {
    iterations++;
    publish();
    void flushDiscards();
    if (s.paused) {
      await condition(() => !s.paused || s.stopRequested);
      continue;
    }
    if (endpoints.length === 0) {
      await refreshEndpoints();
      if (endpoints.length === 0) {
        await condition(() => s.stopRequested, '5 seconds');
        continue;
      }
    }

    if (syncMode) {
      // Coupled baseline: a batch of maxGroups groups, barrier, train, sync every server, repeat.
      for (let i = 0; i < s.config.trainer.maxGroups; i++) {
        const plan = planNextGroup(s);
        if (plan) await startGroup(plan);
        else await condition(() => Object.keys(s.inFlight).length === 0 || planNextGroup(s) !== null);
        if (!plan) i--;
      }
      await condition(() => Object.keys(s.inFlight).length === 0);
      const result = await runTrainStep(1);
      if (result) {
        await rollOut(result.version);
        await condition(() => !rolloutInFlight);
      }
    } else {
      // Rollout-wise: fill env capacity, then train whenever enough eligible groups are buffered.
      // All groups that fit start in one workflow task (their start commands go out together).
      const starts: Array<Promise<void>> = [];
      for (let plan = planNextGroup(s); plan; plan = planNextGroup(s)) starts.push(startGroup(plan));
      await Promise.all(starts);
      // The trainer does not wait for model sync (DART §3.2) unless a canary gate may still refuse the
      // version being rolled out (then the next step must not build on it). A version finished while
      // another rolls out is rolled out next; versions in between are skipped.
      // When continue-as-new is due, no new step starts, so the trainer goes idle and the run can end.
      const overlap = s.config.eval.gateEveryVersions === 0;
      if (!trainInFlight && (overlap || !rolloutInFlight) && !continueAsNewDue(iterations)) {
        const batch = selectTrainBatch(s);
        if (batch) {
          void runTrainStep().then(async (result) => {
            if (!result) return;
            if (rolloutInFlight) pendingRollout = result.version;
            else await rollOut(result.version);
          });
        }
      }
      if (pendingRollout !== null && !rolloutInFlight) {
        const version = pendingRollout;
        pendingRollout = null;
        void rollOut(version);
      }
      dirty = false;
      await condition(() => dirty, '30 seconds');
    }

    const canSuggested = continueAsNewDue(iterations);
    if (canSuggested && !trainInFlight && !rolloutInFlight) {
      // Children (task groups, evals) run on and signal the next run by workflow id; only the train step
      // must be idle, since an activity does not survive continue-as-new.
      await condition(allHandlersFinished);
      await flushDiscards();
      if (!trainInFlight && !rolloutInFlight) {
        await flushDiscards();
        publish();
        return continueAsNew<typeof campaignWorkflow>({
          config: s.config,
          state: s,
          continueAsNewAfterIterations: input.continueAsNewAfterIterations,
        });
      }
    }
  }

  // ---- drain: wait for in-flight work so nothing is lost, then a final evaluation ---------------------
  s.phase = 'draining';
  publish();
  await condition(() => !trainInFlight && !rolloutInFlight && Object.keys(s.inFlight).length === 0, '30 minutes');
  if (pendingRollout !== null) {
    await rollOut(pendingRollout);
    pendingRollout = null;
    await condition(() => !rolloutInFlight, '10 minutes');
  }
  if (s.lastEvalVersion !== s.policyVersion || evalInFlight) {
    if (!evalInFlight) startEval(s.policyVersion);
    await condition(() => !evalInFlight, '30 minutes');
  }
  // Groups still buffered were never trained on: record why, then make sure every record is written.
  discard(groupDiscards(s.buffer, 'stop', 'unused-at-stop'));
  await flushDiscards();
  s.phase = 'completed';
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
