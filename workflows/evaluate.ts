/**
 * evaluateWorkflow — greedy evaluation of the served policy on held-out seeds of each task (learning
 * curves). Reports an EvalPoint to the campaign (by workflow id) and records it in MinIO.
 */
import { getExternalWorkflowHandle, log, workflowInfo } from '@temporalio/workflow';
import type { RunEpisodeResult } from '../activities/env/input';
import type { EvalPoint } from '../schemas/campaign';
import { envActivities, dataActivities } from './activity-proxies';
import { evalFinishedSignal } from './messages';
import { isSuccess } from '../algorithms/success';

export interface EvaluateInput {
  campaignId: string;
  parentWorkflowId?: string;
  version: number;
  tasks: Array<{ id: string; family?: unknown; seeds?: unknown } & Record<string, unknown>>;
  episodesPerTask: number;
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
}

const { runEpisode } = envActivities;
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

export async function evaluateWorkflow(input: EvaluateInput): Promise<EvalPoint> {
  const evalId = workflowInfo().workflowId;
  const jobs = input.tasks.flatMap((task) =>
    heldOutSeeds(task, input.episodesPerTask).map((seed, i) => ({ task, seed, i }))
  );
  const episodeInput = ({ task, seed, i }: (typeof jobs)[number]) => ({
    campaignId: `${input.campaignId}.eval`,
    groupId: `${evalId}-${task.id}`.slice(-180),
    trajectoryId: `${evalId}-${task.id}-${i}`.slice(-190),
    task,
    seed,
    policy: {
      kind: input.policyKind,
      endpoints: input.endpoints,
      versionHint: input.version,
      temperature: 0,
      options: { ...input.policyOptions, greedy: true },
    },
    source: 'rollout' as const,
  });
  // One activity per episode (the unit of scheduling); infrastructure failures are retried by Temporal.
  const results: Array<PromiseSettledResult<RunEpisodeResult>> = await Promise.allSettled(
    jobs.map((j) => runEpisode(episodeInput(j)))
  );
  const ordered = jobs;
  const perTask: Record<string, { ok: number; n: number }> = {};
  const answeredBy = new Set<number>();
  let ok = 0;
  let n = 0;
  results.forEach((r, idx) => {
    const job = ordered[idx]!;
    const family = typeof job.task.family === 'string' ? job.task.family : job.task.id;
    if (r.status !== 'fulfilled' || r.value.reward === null) return; // infra failure: not a data point
    answeredBy.add(r.value.maxPolicyVersion);
    answeredBy.add(r.value.minPolicyVersion);
    const t = (perTask[family] ??= { ok: 0, n: 0 });
    t.n++;
    n++;
    if (isSuccess(r.value.reward, input.successThreshold)) {
      t.ok++;
      ok++;
    }
  });
  const point: EvalPoint = {
    // The version that actually answered (servers may roll while an evaluation runs).
    version: answeredBy.size === 1 ? [...answeredBy][0]! : input.version,
    successRate: n === 0 ? 0 : ok / n,
    episodes: n,
    atEpisodes: input.atEpisodes,
    atMs: Date.now() - input.startedAtMs,
    perFamily: Object.fromEntries(Object.entries(perTask).map(([k, v]) => [k, v.n === 0 ? 0 : v.ok / v.n])),
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
