/**
 * DART's learning loop in one process, without Temporal: real browser envs (runEpisodeCore), the policy
 * engine of the policy server (in-process, no HTTP), and the trainer's trainStep / behaviourClone on
 * MinIO. Used by the learning-curve benchmark and the trainer's browser learning test — evidence that
 * the algorithm learns, independent of the orchestration.
 */
import { builtinPolicies } from '../../activities/env/policies';
import type { EpisodePolicy, PolicyFactory } from '../../activities/env/policy';
import { runEpisodeCore } from '../../activities/env/run-episode';
import type { RunEpisodeResult } from '../../activities/env/input';
import { ensureInitialCheckpoint } from '../../activities/trainer/checkpoints';
import { runBehaviourClone, runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainGroupRef } from '../../activities/trainer/types';
import { createPrng, hashSeed } from '../../algorithms';
import type { EnvPool } from '../../envs/types';
import { PolicyEngine } from '../../rollout/engine';
import type { CampaignConfig } from '../../schemas/config';
import type { ObjectStore } from '../../storage/object-store';
import type { TaskSpec } from '../../tasks/schema';

export interface LocalRlOptions {
  store: ObjectStore;
  pool: EnvPool;
  campaignId: string;
  tasks: TaskSpec[];
  trainer: CampaignConfig['trainer'];
  groupSize: number;
  groupsPerStep: number;
  maxEpisodes: number;
  bcDemos?: number;
  bcEpochs?: number;
  evalEvery: number;
  evalEpisodesPerTask: number;
  /** Stop after this many consecutive evaluations at or above the target. */
  target?: { success: number; consecutive: number };
  temperature?: number;
  log?: (line: string) => void;
}

export interface CurvePoint {
  episodes: number;
  seconds: number;
  version: number;
  success: number;
  perTask: Record<string, number>;
}

export interface LocalRlResult {
  curve: CurvePoint[];
  episodes: number;
  seconds: number;
  reachedAt?: CurvePoint;
}

function enginePolicy(engine: PolicyEngine, greedy: boolean): PolicyFactory {
  return (): EpisodePolicy => ({
    async act(obs, { seed, temperature }) {
      const a = await engine.act(
        { png: obs.png, instruction: obs.instruction, fields: obs.fields },
        { seed, temperature: greedy ? 1 : temperature, greedy }
      );
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
  });
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

export async function runLocalRl(o: LocalRlOptions): Promise<LocalRlResult> {
  const log = o.log ?? (() => undefined);
  const spec = specForWidth(1);
  const started = Date.now();
  const seconds = () => (Date.now() - started) / 1000;
  await o.store.ensureBucket();
  let version = await ensureInitialCheckpoint(o.store, o.campaignId, spec, 0);
  const engine = new PolicyEngine({ serverId: 'local', spec, store: o.store, maxBatch: 32, maxWaitMs: 1 });
  await engine.reload(o.campaignId, version);
  const policies = { ...builtinPolicies(), sample: enginePolicy(engine, false), greedy: enginePolicy(engine, true) };
  const deps = { pool: o.pool, store: o.store, policies };
  const hooks = { heartbeat: () => undefined, attempt: 1 };
  const slots = o.pool.slots;
  const rng = createPrng(hashSeed(o.campaignId));
  let episodes = 0;
  let trainStep = 0;
  const curve: CurvePoint[] = [];

  const episode =
    (
      task: TaskSpec,
      seed: number,
      trajectoryId: string,
      groupId: string,
      kind: string,
      source: 'rollout' | 'demo' = 'rollout'
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
          policy: { kind, temperature: o.temperature ?? 1 },
          source,
        },
        hooks
      );

  const evaluate = async () => {
    const perTask: Record<string, number> = {};
    let ok = 0;
    let n = 0;
    for (const task of o.tasks) {
      const jobs = Array.from({ length: o.evalEpisodesPerTask }, (_, i) =>
        episode(
          task,
          task.seeds.heldOut.from + i * 97,
          `eval-v${version}-${task.id}-${i}`,
          `eval-v${version}-${task.id}`,
          'greedy'
        )
      );
      const rs = await parallel(jobs, slots);
      const wins = rs.filter((r) => (r.reward ?? 0) > 0).length;
      perTask[task.family] = wins / rs.length;
      ok += wins;
      n += rs.length;
    }
    const point = { episodes, seconds: seconds(), version, success: ok / n, perTask };
    curve.push(point);
    log(
      `eval v${version}: ${(point.success * 100).toFixed(1)}% ${JSON.stringify(perTask)} after ${episodes} episodes, ${point.seconds.toFixed(0)}s`
    );
    return point;
  };

  if (o.bcDemos && o.bcDemos > 0) {
    const jobs = Array.from({ length: o.bcDemos }, (_, i) => {
      const task = o.tasks[i % o.tasks.length]!;
      return episode(task, task.seeds.train.from + 7 + i * 13, `demo-${i}`, `demo-${i}`, 'oracle', 'demo');
    });
    const demos = (await parallel(jobs, slots)).filter((r) => (r.reward ?? 0) > 0);
    const groups: TrainGroupRef[] = demos.map((r) => ({
      groupId: `demo-${r.trajectoryId}`,
      taskId: r.taskId,
      trajectories: [{ trajectoryId: r.trajectoryId, manifestKey: r.manifestKey, reward: 1, injectedFromPool: false }],
    }));
    const bc = await runBehaviourClone(
      { store: o.store },
      {
        campaignId: o.campaignId,
        trainStep: ++trainStep,
        fromVersion: version,
        demos: groups,
        epochs: o.bcEpochs ?? 15,
        learningRate: o.trainer.learningRate,
        minibatchSize: o.trainer.minibatchSize,
        policy: { seed: 0, width: 1 },
      }
    );
    version = bc.version;
    await engine.reload(o.campaignId, version);
    log(`behaviour cloning on ${groups.length} demos → v${version}`);
  }
  const referenceVersion = version;
  let reachedAt: CurvePoint | undefined;
  let streak = 0;
  const first = await evaluate();
  if (o.target && first.success >= o.target.success) streak = 1;

  while (episodes < o.maxEpisodes) {
    const jobs: Array<() => Promise<RunEpisodeResult>> = [];
    const groupOf: string[] = [];
    for (let g = 0; g < o.groupsPerStep; g++) {
      const task = o.tasks[rng.nextInt(o.tasks.length)]!;
      const seed =
        task.seeds.train.from + rng.nextInt(Math.min(1_000_000, task.seeds.train.to - task.seeds.train.from));
      const groupId = `s${trainStep + 1}-g${g}`;
      for (let e = 0; e < o.groupSize; e++) {
        jobs.push(episode(task, seed, `${groupId}-e${e}`, groupId, 'sample'));
        groupOf.push(groupId);
      }
    }
    const results = await parallel(jobs, slots);
    episodes += results.length;
    const byGroup = new Map<string, RunEpisodeResult[]>();
    results.forEach((r, i) => byGroup.set(groupOf[i]!, [...(byGroup.get(groupOf[i]!) ?? []), r]));
    const groups: TrainGroupRef[] = [];
    for (const [groupId, rs] of byGroup) {
      const rewards = rs.map((r) => r.reward ?? 0);
      if (Math.min(...rewards) === Math.max(...rewards)) continue; // zero advantage: no signal (DART §3.4)
      groups.push({
        groupId,
        taskId: rs[0]!.taskId,
        trajectories: rs.map((r) => ({
          trajectoryId: r.trajectoryId,
          manifestKey: r.manifestKey,
          reward: r.reward ?? 0,
          injectedFromPool: false,
        })),
      });
    }
    if (groups.length > 0) {
      const r = await runTrainStep(
        { store: o.store },
        {
          campaignId: o.campaignId,
          trainStep: ++trainStep,
          fromVersion: version,
          groups,
          trainer: o.trainer,
          maxStaleness: 1,
          referenceVersion,
          policy: { seed: 0, width: 1 },
        }
      );
      version = r.version;
      await engine.reload(o.campaignId, version);
    }
    if (trainStep % o.evalEvery === 0 || episodes >= o.maxEpisodes) {
      const p = await evaluate();
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
  return { curve, episodes, seconds: seconds(), reachedAt };
}
