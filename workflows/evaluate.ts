/**
 * evaluateWorkflow — evaluation of the served policy on held-out seeds of each task (learning curves):
 * greedy (the headline number, and what the stop rule and the rollout gate read) and, side by side on the
 * same seeds, temperature 1 (what RL samples; issue 14.6). Reports an EvalPoint to the campaign (by
 * workflow id) and records it in MinIO.
 */
import { getExternalWorkflowHandle, log, patched, workflowInfo } from '@temporalio/workflow';
import type { RunEpisodeResult } from '../activities/env/input';
import type { EvalPoint } from '../schemas/campaign';
import { envActivitiesWith, dataActivities } from './activity-proxies';
import { evalFinishedSignal } from './messages';
import { isSuccess } from '../algorithms/success';

export interface EvaluateInput {
  campaignId: string;
  parentWorkflowId?: string;
  version: number;
  tasks: Array<{ id: string; family?: unknown; seeds?: unknown } & Record<string, unknown>>;
  episodesPerTask: number;
  /** Temperature-1 episodes per task, on the first of the same seeds (default: episodesPerTask). */
  sampledEpisodesPerTask?: number;
  endpoints: string[];
  policyKind: string;
  /** Extra policy options (e.g. the served model name of a VLM); greedy decoding is always added. */
  policyOptions?: Record<string, unknown>;
  atEpisodes: number;
  startedAtMs: number;
  /** reward ≥ this is a success; default 1.0 (campaign.successThreshold). */
  successThreshold?: number;
  /** Record the point in MinIO (learning curve); the rollout gate's quick checks are not recorded. */
  record?: boolean;
  /** env.episodeHeartbeatTimeoutSeconds in ms (absent: the default minute). */
  episodeHeartbeatTimeoutMs?: number;
}

/** Patch id of the temperature-1 episodes (docs/upgrades.md): evaluations started before it run greedy only. */
export const EVAL_SAMPLED_PATCH = 'eval-sampled-side-by-side';

const data = dataActivities;

/** Evenly spread held-out seeds of a task (same seeds for every version: comparable curve points). */
export function heldOutSeeds(task: EvaluateInput['tasks'][number], count: number): number[] {
  const range = (task.seeds as { heldOut?: { from: number; to: number } } | undefined)?.heldOut ?? {
    from: 1_000_000,
    to: 1_010_000,
  };
  const span = range.to - range.from;
  const n = Math.min(count, span);
  return Array.from({ length: n }, (_, i) => range.from + Math.floor((i * span) / n));
}

/**
 * The episodes of one evaluation: every task's greedy seeds, then (with `modes` including 'sampled') its
 * temperature-1 episodes on the first `sampledEpisodesPerTask` of those same seeds, so both columns compare
 * the same screens. Fewer sampled episodes make an evaluation cheaper where only greedy drives decisions.
 */
export function evaluationJobs(
  input: Pick<EvaluateInput, 'tasks' | 'episodesPerTask' | 'sampledEpisodesPerTask'>,
  modes: ReadonlyArray<'greedy' | 'sampled'>
): Array<{ task: EvaluateInput['tasks'][number]; seed: number; i: number; mode: 'greedy' | 'sampled' }> {
  return modes.flatMap((mode) =>
    input.tasks.flatMap((task) => {
      const seeds = heldOutSeeds(task, input.episodesPerTask);
      // slice caps at the greedy seeds; undefined keeps them all.
      const count = mode === 'sampled' ? input.sampledEpisodesPerTask : undefined;
      return seeds.slice(0, count).map((seed, i) => ({ task, seed, i, mode }));
    })
  );
}

export async function evaluateWorkflow(input: EvaluateInput): Promise<EvalPoint> {
  const evalId = workflowInfo().workflowId;
  const withSampled = patched(EVAL_SAMPLED_PATCH);
  const modes: Array<'greedy' | 'sampled'> = withSampled ? ['greedy', 'sampled'] : ['greedy'];
  const jobs = evaluationJobs(input, modes);
  const episodeInput = ({ task, seed, i, mode }: (typeof jobs)[number]) => ({
    campaignId: `${input.campaignId}.eval`,
    groupId: `${evalId}-${task.id}${mode === 'sampled' ? '-t1' : ''}`.slice(-180),
    trajectoryId: `${evalId}-${task.id}${mode === 'sampled' ? '-t1' : ''}-${i}`.slice(-190),
    task,
    seed,
    policy:
      mode === 'greedy'
        ? {
            kind: input.policyKind,
            endpoints: input.endpoints,
            versionHint: input.version,
            temperature: 0,
            options: { ...input.policyOptions, greedy: true },
          }
        : {
            kind: input.policyKind,
            endpoints: input.endpoints,
            versionHint: input.version,
            temperature: 1,
            options: { ...input.policyOptions },
          },
    source: 'rollout' as const,
  });
  // One activity per episode (the unit of scheduling); infrastructure failures are retried by Temporal.
  const { runEpisode } = envActivitiesWith(input.episodeHeartbeatTimeoutMs);
  const results: Array<PromiseSettledResult<RunEpisodeResult>> = await Promise.allSettled(
    jobs.map((j) => runEpisode(episodeInput(j)))
  );
  const tally = { greedy: { ok: 0, n: 0, perTask: {} as Record<string, { ok: number; n: number }> } };
  const sampledTally = { ok: 0, n: 0, perTask: {} as Record<string, { ok: number; n: number }> };
  const answeredBy = new Set<number>();
  results.forEach((r, idx) => {
    const job = jobs[idx]!;
    const family = typeof job.task.family === 'string' ? job.task.family : job.task.id;
    if (r.status !== 'fulfilled' || r.value.reward === null) return; // infra failure: not a data point
    const into = job.mode === 'greedy' ? tally.greedy : sampledTally;
    if (job.mode === 'greedy') {
      answeredBy.add(r.value.maxPolicyVersion);
      answeredBy.add(r.value.minPolicyVersion);
    }
    const t = (into.perTask[family] ??= { ok: 0, n: 0 });
    t.n++;
    into.n++;
    if (isSuccess(r.value.reward, input.successThreshold)) {
      t.ok++;
      into.ok++;
    }
  });
  const rates = (perTask: Record<string, { ok: number; n: number }>) =>
    Object.fromEntries(Object.entries(perTask).map(([k, v]) => [k, v.n === 0 ? 0 : v.ok / v.n]));
  const { ok, n, perTask } = tally.greedy;
  const point: EvalPoint = {
    // The version that actually answered (servers may roll while an evaluation runs).
    version: answeredBy.size === 1 ? [...answeredBy][0]! : input.version,
    successRate: n === 0 ? 0 : ok / n,
    episodes: n,
    atEpisodes: input.atEpisodes,
    atMs: Date.now() - input.startedAtMs,
    perFamily: rates(perTask),
    ...(withSampled
      ? {
          sampledSuccessRate: sampledTally.n === 0 ? 0 : sampledTally.ok / sampledTally.n,
          sampledPerFamily: rates(sampledTally.perTask),
          sampledEpisodes: sampledTally.n,
          episodesPerFamily: Object.fromEntries(Object.entries(perTask).map(([k, v]) => [k, v.n])),
        }
      : {}),
  };
  if (input.record !== false) await data.recordEvalPoint({ campaignId: input.campaignId, point });
  if (input.parentWorkflowId) {
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(evalFinishedSignal, point);
    } catch (err) {
      log.warn('campaign not reachable for the eval result', { error: String(err) });
    }
  }
  return point;
}
