/**
 * DART's learning loop in one process, without Temporal: real browser envs (runEpisodeCore), the policy
 * engine of the policy server (in-process, no HTTP), and the trainer's trainStep / behaviourClone on
 * MinIO. Used by the learning-curve benchmark, the DART ablation and the trainer's browser learning test —
 * evidence that the algorithm learns, independent of the orchestration.
 *
 * Scheduling and data curation are the campaign's own pure functions (workflows/logic/campaign-state.ts:
 * planNextGroup → dynamic rollout number §4.6 and dynamic max steps §4.7, recordGroup, selectTrainBatch →
 * curateGroup §3.4 with experience-pool injection §4.8), and the experience pool is the data manager's
 * (activities/data/campaign-data.ts) on MinIO — only the Temporal plumbing is replaced by a synchronous
 * loop (like the campaign's `mode: sync`): plan `groupsPerStep` groups, run them, record them, train.
 */
import { builtinPolicies } from '../../activities/env/policies';
import type { EpisodePolicy, PolicyFactory } from '../../activities/env/policy';
import { runEpisodeCore } from '../../activities/env/run-episode';
import type { RunEpisodeResult } from '../../activities/env/input';
import { createCampaignDataActivities } from '../../activities/data/campaign-data';
import { taskRefOf } from '../../activities/data/campaign-setup';
import { ensureInitialCheckpoint, loadCheckpoint, writeCheckpoint } from '../../activities/trainer/checkpoints';
import { runBehaviourClone, runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainGroupRef } from '../../activities/trainer/types';
import type { EnvPool } from '../../envs/types';
import { PolicyEngine } from '../../rollout/engine';
import type { GroupSummary, TrajectorySummary } from '../../schemas/campaign';
import { isSuccess } from '../../algorithms/success';
import { CampaignConfigSchema, type CampaignConfig, type CampaignConfigInput } from '../../schemas/config';
import type { ObjectStore } from '../../storage/object-store';
import type { PolicySpec } from '../../policy/spec';
import type { PreviousAction } from '../../policy/observation';
import type { TaskSpec } from '../../tasks/schema';
import {
  groupPoolOptions,
  initialCampaignState,
  markGroupStarted,
  planNextGroup,
  pruneStaleBuffer,
  recordGroup,
  selectTrainBatch,
  takeFromBuffer,
  type GroupPlan,
} from '../../workflows/logic/campaign-state';
import { addVersion } from '../../workflows/logic/lineage';
import { toTrajectorySummary } from '../../workflows/logic/trajectory-summary';

export interface LocalRlOptions {
  store: ObjectStore;
  pool: EnvPool;
  campaignId: string;
  tasks: TaskSpec[];
  trainer: CampaignConfig['trainer'];
  /** Rollouts per group when the rollout number is fixed (rollout.nMax unless `curation` sets it). */
  groupSize: number;
  /** Task groups planned per round; every round ends with one train step on what is trainable. */
  groupsPerStep: number;
  maxEpisodes: number;
  bcDemos?: number;
  bcEpochs?: number;
  /** Seed of the initial weights and of the demonstrations' task seeds (default 0). */
  seed?: number;
  /** Evaluate every this many train steps (ignored when evalEveryEpisodes is set). */
  evalEvery: number;
  /** Evaluate whenever another this many RL episodes are done (comparable curves across rollout rules). */
  evalEveryEpisodes?: number;
  evalEpisodesPerTask: number;
  /** Held-out episodes per task of the last evaluation (default evalEpisodesPerTask): a finer final number. */
  finalEvalEpisodesPerTask?: number;
  /** Stop after this many consecutive evaluations at or above the target. */
  target?: { success: number; consecutive: number };
  temperature?: number;
  /** Evaluate at temperature 1 too, next to greedy (default true; issue 14.6). */
  sampledEval?: boolean;
  /**
   * DART's curation switches, as CampaignConfig `rollout` / `curation` fields, applied by the campaign's
   * own functions. Defaults here (when not set): fixed rollout number `groupSize`, each task's own max
   * steps, no experience pool — plain GRPO on groups with a non-zero advantage.
   */
  curation?: {
    rollout?: Partial<CampaignConfigInput['rollout']>;
    curation?: Partial<CampaignConfigInput['curation']>;
  };
  /** Start from this checkpoint of another campaign (copied here as v0, with its optimizer state). */
  startFrom?: { campaignId: string; version: number };
  /** Successes put into the experience pool before RL (DART §4.8 pre-collection), e.g. oracle demos. */
  precollected?: TrajectorySummary[];
  /** The start checkpoint's evaluation when it is already known (skips re-evaluating it). */
  initialEval?: CurvePoint;
  /**
   * Run with this policy architecture instead of the default (the issue-14 A/B: legacyPolicySpec vs the
   * default). Width 1 only; the trainer activities get it as TrainerDeps.spec.
   */
  spec?: PolicySpec;
  log?: (line: string) => void;
}

export interface CurvePoint {
  episodes: number;
  seconds: number;
  version: number;
  success: number;
  perTask: Record<string, number>;
  /** Temperature-1 (sampled) success on the same held-out seeds, overall and per family (issue 14.6). */
  sampledSuccess?: number;
  sampledPerTask?: Record<string, number>;
  /** Held-out episodes per family of each of the two evaluations. */
  evalEpisodesPerTask?: number;
  /**
   * Share of the evaluation's greedy steps that repeat the previous action although it changed nothing
   * (the issue-14 "greedy no-op until the budget ends" failure), whatever the spec feeds the network.
   */
  noopRepeats?: number;
}

export interface LocalRlStats {
  trainSteps: number;
  /** Task groups rolled out, and the mean rollout number n per group (DART §4.6: 8 → 5). */
  groups: number;
  meanRolloutN: number;
  /** Mean steps per RL episode (DART §4.7: 30 → < 10) and the mean step budget given. */
  meanEpisodeSteps: number;
  meanMaxSteps: number;
  /** Groups trained on / skipped (no signal, all success) / with a pooled success injected (§4.8). */
  trainedGroups: number;
  skippedGroups: number;
  injectedGroups: number;
  /** RL episodes per family. */
  episodesPerTask: Record<string, number>;
}

export interface LocalRlResult {
  curve: CurvePoint[];
  episodes: number;
  seconds: number;
  reachedAt?: CurvePoint;
  /** The last policy version (the checkpoint the final evaluation measured). */
  version: number;
  /** Successful demonstrations of the BC warm start (pre-collected successes for a later pool). */
  demos: TrajectorySummary[];
  stats: LocalRlStats;
}

/**
 * The engine as an episode's policy. A factory call is one episode, so the closure keeps the previous
 * step's action and screenshot: the engine gets `previous` (action index, and whether this screenshot's
 * bytes differ — what the trainer reads from the steps' content-addressed keys).
 */
interface RepeatCounter {
  steps: number;
  noopRepeats: number;
}

function enginePolicy(engine: PolicyEngine, greedy: boolean, counter?: RepeatCounter): PolicyFactory {
  return (): EpisodePolicy => {
    let last: { actionIndex: number; png: Uint8Array } | undefined;
    return {
      async act(obs, { seed, temperature }) {
        const previous: PreviousAction | undefined = last && {
          actionIndex: last.actionIndex,
          changed: !Buffer.from(obs.png).equals(Buffer.from(last.png)),
        };
        const a = await engine.act(
          { png: obs.png, instruction: obs.instruction, fields: obs.fields, ...(previous ? { previous } : {}) },
          { seed, temperature: greedy ? 1 : temperature, greedy }
        );
        last = { actionIndex: a.actionIndex, png: obs.png };
        if (counter) {
          counter.steps++;
          if (previous && !previous.changed && previous.actionIndex === a.actionIndex) counter.noopRepeats++;
        }
        return {
          action: a.action,
          actionText: a.actionText,
          actionIndex: a.actionIndex,
          logProb: a.logProb,
          entropy: a.entropy,
          policyVersion: a.policyVersion,
          policyServer: a.serverId,
        };
      },
    };
  };
}

/** Runs `jobs` with at most `limit` in flight (the env pool's slots). */
async function parallel<T>(jobs: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    })
  );
  return out;
}

/** The campaign config the local loop plans with (same schema and defaults as a real campaign). */
export function localCampaignConfig(
  o: Pick<LocalRlOptions, 'campaignId' | 'trainer' | 'groupSize' | 'groupsPerStep' | 'curation' | 'bcDemos'>
): CampaignConfig {
  return CampaignConfigSchema.parse({
    campaign: { id: o.campaignId },
    // The cloning start, as a campaign has it (trainer.demoAnchorCoef needs one).
    policy: { bcWarmStartEpisodes: o.bcDemos ?? 0 },
    rollout: {
      dynamicRollout: false,
      dynamicMaxSteps: false,
      nMax: o.groupSize,
      ...o.curation?.rollout,
      // Planning ignores env capacity here: a round's groups are queued on the env pool's slots.
      envConcurrency: 1_000_000,
    },
    curation: { experiencePool: false, groupSize: o.groupSize, ...o.curation?.curation },
    trainer: { ...o.trainer, minGroups: 1, maxGroups: o.groupsPerStep },
  });
}

export async function runLocalRl(o: LocalRlOptions): Promise<LocalRlResult> {
  const log = o.log ?? (() => undefined);
  const spec = o.spec ?? specForWidth(1);
  // The trainer gets the spec explicitly (a non-default architecture for the A/B; the default otherwise).
  const trainerDeps = { store: o.store, spec };
  const started = Date.now();
  const seconds = () => (Date.now() - started) / 1000;
  const config = localCampaignConfig(o);
  await o.store.ensureBucket();
  let version: number;
  if (o.startFrom) {
    const src = await loadCheckpoint(o.store, o.startFrom.campaignId, o.startFrom.version, spec);
    await writeCheckpoint(o.store, {
      campaignId: o.campaignId,
      version: 0,
      parentVersion: null,
      spec,
      weights: src.weights,
      optimizer: src.optimizer,
      metrics: { copiedFromVersion: o.startFrom.version },
    });
    version = 0;
  } else version = await ensureInitialCheckpoint(o.store, o.campaignId, spec, o.seed ?? 0);
  const engine = new PolicyEngine({ serverId: 'local', spec, store: o.store, maxBatch: 32, maxWaitMs: 1 });
  await engine.reload(o.campaignId, version);
  const greedyRepeats: RepeatCounter = { steps: 0, noopRepeats: 0 };
  const policies = {
    ...builtinPolicies(),
    sample: enginePolicy(engine, false),
    greedy: enginePolicy(engine, true, greedyRepeats),
  };
  const deps = { pool: o.pool, store: o.store, policies };
  const data = createCampaignDataActivities({ store: o.store });
  const hooks = { heartbeat: () => undefined, attempt: 1 };
  const slots = o.pool.slots;
  const specs = new Map(o.tasks.map((t) => [t.id, t]));
  let trainStep = 0;
  const curve: CurvePoint[] = [];
  const counters = { groups: 0, nSum: 0, steps: 0, maxSteps: 0, trained: 0, skipped: 0, injected: 0 };

  const episode =
    (
      task: TaskSpec,
      seed: number,
      trajectoryId: string,
      groupId: string,
      kind: string,
      source: 'rollout' | 'demo' = 'rollout',
      maxSteps?: number
    ) =>
    () =>
      runEpisodeCore(
        deps,
        {
          campaignId: o.campaignId,
          groupId,
          trajectoryId,
          task,
          seed,
          maxSteps,
          policy: { kind, temperature: o.temperature ?? 1 },
          source,
        },
        hooks
      );

  const evaluate = async (episodes: number, count = o.evalEpisodesPerTask) => {
    Object.assign(greedyRepeats, { steps: 0, noopRepeats: 0 });
    // Greedy (the headline number) and temperature 1 (what RL samples) on the same held-out seeds.
    const run = async (kind: 'greedy' | 'sample') => {
      const perTask: Record<string, number> = {};
      let ok = 0;
      let n = 0;
      for (const task of o.tasks) {
        const jobs = Array.from({ length: count }, (_, i) =>
          episode(
            task,
            task.seeds.heldOut.from + i * 97,
            `eval-v${version}-${kind}-${task.id}-${i}`,
            `eval-v${version}-${kind}-${task.id}`,
            kind
          )
        );
        const rs = await parallel(jobs, slots);
        const wins = rs.filter((r) => isSuccess(r.reward, config.campaign.successThreshold)).length;
        perTask[task.family] = wins / rs.length;
        ok += wins;
        n += rs.length;
      }
      return { success: ok / n, perTask };
    };
    const greedy = await run('greedy');
    const noopRepeats = greedyRepeats.steps ? greedyRepeats.noopRepeats / greedyRepeats.steps : 0;
    const sampled = o.sampledEval === false ? undefined : await run('sample');
    const point: CurvePoint = {
      episodes,
      seconds: seconds(),
      version,
      success: greedy.success,
      perTask: greedy.perTask,
      ...(sampled ? { sampledSuccess: sampled.success, sampledPerTask: sampled.perTask } : {}),
      evalEpisodesPerTask: count,
      noopRepeats,
    };
    curve.push(point);
    log(
      `eval v${version}: greedy ${(point.success * 100).toFixed(1)}% ${JSON.stringify(greedy.perTask)}${sampled ? `, T=1 ${(sampled.success * 100).toFixed(1)}% ${JSON.stringify(sampled.perTask)}` : ''} (no-op repeats ${(noopRepeats * 100).toFixed(0)}% of greedy steps) after ${episodes} episodes, ${point.seconds.toFixed(0)}s`
    );
    return point;
  };

  let demos: TrajectorySummary[] = [];
  if (o.bcDemos && o.bcDemos > 0) {
    const jobs = Array.from({ length: o.bcDemos }, (_, i) => {
      const task = o.tasks[i % o.tasks.length]!;
      const span = task.seeds.train.to - task.seeds.train.from;
      const seed = task.seeds.train.from + ((7 + i * 13 + (o.seed ?? 0) * 100_003) % span);
      return episode(task, seed, `demo-${i}`, `demo-${i}`, 'oracle', 'demo');
    });
    demos = (await parallel(jobs, slots))
      .filter((r) => isSuccess(r.reward, config.campaign.successThreshold))
      .map((r) => toTrajectorySummary(r, `demo-${r.trajectoryId}`));
    const groups: TrainGroupRef[] = demos.map((r) => ({
      groupId: r.groupId,
      taskId: r.taskId,
      trajectories: [{ trajectoryId: r.trajectoryId, manifestKey: r.manifestKey, reward: 1, injectedFromPool: false }],
    }));
    const bc = await runBehaviourClone(trainerDeps, {
      campaignId: o.campaignId,
      trainStep: ++trainStep,
      fromVersion: version,
      demos: groups,
      epochs: o.bcEpochs ?? 15,
      learningRate: o.trainer.learningRate,
      minibatchSize: o.trainer.minibatchSize,
      policy: { seed: 0, width: 1 },
    });
    version = bc.version;
    await engine.reload(o.campaignId, version);
    log(`behaviour cloning on ${groups.length} demos → v${version}`);
  }

  // The campaign's state, planned and curated by the campaign's own functions.
  const refs = o.tasks.map(taskRefOf);
  const state = initialCampaignState({
    campaignId: o.campaignId,
    config,
    tasks: refs,
    heldOut: refs,
    startedAtMs: started,
    initialVersion: version,
  });
  state.phase = 'running';
  if (config.curation.experiencePool && o.precollected?.length) {
    await data.addToPool({ campaignId: o.campaignId, trajectories: o.precollected });
    for (const [taskId, n] of Object.entries(await data.poolSizes({ campaignId: o.campaignId })))
      if (state.stats[taskId]) state.stats[taskId].poolSize = n;
  }
  const referenceVersion = version;
  let reachedAt: CurvePoint | undefined;
  let streak = 0;
  const first = o.initialEval ? { ...o.initialEval, seconds: seconds(), version } : await evaluate(0);
  if (o.initialEval) curve.push(first);
  if (o.target && first.success >= o.target.success) streak = 1;
  let nextEvalAt = o.evalEveryEpisodes ?? Infinity;

  let attempted = 0;
  // (attempts are bounded too, so an env that only fails cannot loop forever)
  while (state.episodes < o.maxEpisodes && attempted < 2 * o.maxEpisodes + 1000) {
    // One round: plan groups (round-robin, rollout number and step budget per task: §4.6, §4.7).
    const plans: GroupPlan[] = [];
    for (let g = 0; g < o.groupsPerStep; g++) {
      const plan = planNextGroup(state);
      if (!plan) break;
      markGroupStarted(state, plan, Date.now());
      plans.push(plan);
    }
    const jobs: Array<() => Promise<RunEpisodeResult | null>> = [];
    const planOf: number[] = [];
    plans.forEach((p, pi) => {
      const task = specs.get(p.task.id)!;
      for (let e = 0; e < p.n; e++) {
        const run = episode(task, p.seed, `${p.groupId}-e${e}`, p.groupId, 'sample', 'rollout', p.maxSteps);
        // An infrastructure failure is counted, never recorded as reward 0 (as in taskGroupWorkflow).
        jobs.push(() => run().catch(() => null));
        planOf.push(pi);
      }
      counters.groups++;
      counters.nSum += p.n;
      counters.maxSteps += p.maxSteps * p.n;
    });
    const results = await parallel(jobs, slots);
    attempted += results.length;
    for (const [pi, plan] of plans.entries()) {
      const rs = results.filter((_, i) => planOf[i] === pi);
      const trajectories: TrajectorySummary[] = [];
      let infraFailures = 0;
      for (const r of rs) {
        if (r && r.status === 'ok' && r.reward !== null) trajectories.push(toTrajectorySummary(r, plan.groupId));
        else infraFailures++;
      }
      counters.steps += trajectories.reduce((a, t) => a + t.numSteps, 0);
      // Experience pool as in taskGroupWorkflow (§4.8): pool the first successes, inject into an all-failed group.
      const { poolByInstruction } = groupPoolOptions(config);
      const successes = trajectories.filter((t) => isSuccess(t.reward, config.campaign.successThreshold));
      if (successes.length > 0 && plan.poolWanted > 0)
        await data.addToPool({
          campaignId: o.campaignId,
          trajectories: successes.slice(0, plan.poolWanted),
          keepNewest: plan.poolWanted,
          successThreshold: config.campaign.successThreshold,
          ...(poolByInstruction ? { perInstruction: poolByInstruction } : {}),
        });
      if (config.curation.experiencePool && trajectories.length > 0 && successes.length === 0) {
        const instructionKey = poolByInstruction
          ? trajectories.find((t) => t.instructionKey)?.instructionKey
          : undefined;
        const pooled = await data.findPoolSuccess({
          campaignId: o.campaignId,
          taskId: plan.task.id,
          ...(instructionKey ? { instructionKey } : {}),
        });
        if (pooled) {
          trajectories.push({ ...pooled, groupId: plan.groupId, injectedFromPool: true });
          counters.injected++;
        }
      }
      const summary: GroupSummary = {
        groupId: plan.groupId,
        taskId: plan.task.id,
        seed: plan.seed,
        requested: plan.n,
        maxSteps: plan.maxSteps,
        trajectories,
        infraFailures,
        startedAt: Date.now(),
        endedAt: Date.now(),
      };
      // As the campaign's groupFinished handler: the pool keeps the newest k successes per task.
      const added = Math.min(successes.length, config.curation.precollectSuccessesPerTask);
      recordGroup(state, summary, config.curation.experiencePool ? added : 0);
    }
    // §3.4: staleness, eligibility, pool injection, down-sampling — then one train step.
    const batch = selectTrainBatch(state, { minGroups: 0 })!;
    takeFromBuffer(state, batch);
    counters.skipped += batch.skipped.length;
    let trained = false;
    if (batch.groups.length > 0) {
      const r = await runTrainStep(trainerDeps, {
        campaignId: o.campaignId,
        trainStep: ++trainStep,
        fromVersion: version,
        groups: batch.groups,
        trainer: config.trainer,
        maxStaleness: config.curation.maxStaleness,
        referenceVersion,
        policy: { seed: 0, width: 1 },
      });
      counters.trained += batch.groups.length;
      state.trainSteps++;
      addVersion(state.lineage, r.version, version);
      version = r.version;
      state.policyVersion = version;
      pruneStaleBuffer(state);
      await engine.reload(o.campaignId, version);
      trained = true;
    }
    const done = state.episodes >= o.maxEpisodes;
    const due = o.evalEveryEpisodes ? state.episodes >= nextEvalAt : trained && trainStep % o.evalEvery === 0;
    if (due || done) {
      while (nextEvalAt <= state.episodes) nextEvalAt += o.evalEveryEpisodes ?? Infinity;
      const p = await evaluate(
        state.episodes,
        done ? (o.finalEvalEpisodesPerTask ?? o.evalEpisodesPerTask) : undefined
      );
      if (o.target && p.success >= o.target.success) {
        streak++;
        if (streak >= o.target.consecutive) {
          reachedAt = p;
          break;
        }
      } else streak = 0;
    }
  }
  await engine.close();
  const episodesPerTask = Object.fromEntries(
    o.tasks.map((t) => [t.family, state.stats[t.id]?.episodes ?? 0] as [string, number])
  );
  return {
    curve,
    episodes: state.episodes,
    seconds: seconds(),
    reachedAt,
    version,
    demos,
    stats: {
      trainSteps: state.trainSteps,
      groups: counters.groups,
      meanRolloutN: counters.groups ? counters.nSum / counters.groups : 0,
      meanEpisodeSteps: state.episodes ? counters.steps / state.episodes : 0,
      meanMaxSteps: counters.nSum ? counters.maxSteps / counters.nSum : 0,
      trainedGroups: counters.trained,
      skippedGroups: counters.skipped,
      injectedGroups: counters.injected,
      episodesPerTask,
    },
  };
}
