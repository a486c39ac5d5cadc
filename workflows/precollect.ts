/**
 * precollectWorkflow — pre-collection of successes for hard tasks (DART §4.8): run groups of attempts at
 * a higher temperature (or with a demonstration policy) until each task has k successes in the
 * experience pool or its attempt budget is spent.
 *
 * Run by `dartflow precollect` before a campaign starts, or by the campaign itself (curation.precollect)
 * with the demonstration policy of its policy.kind: `oracle` for the embedded CNN, `uitars-oracle` for a
 * VLM, whose successes carry the prompt records the Python trainer re-scores (vlm/uitars-oracle-policy.ts).
 * A demonstration policy always succeeds, so it runs only the attempts still wanted.
 */
import { executeChild, workflowInfo } from '@temporalio/workflow';
import { TASK_QUEUES } from '../schemas/task-queues';
import { groupSummaryOf, taskGroupWorkflow } from './task-group';
import { isSuccess } from '../algorithms/success';

export interface PrecollectInput {
  campaignId: string;
  tasks: Array<{ id: string; seeds?: unknown } & Record<string, unknown>>;
  successesPerTask: number;
  maxAttemptsPerTask: number;
  /**
   * The episode policy: a sampling one (`embedded`, `uitars`: the current policy, sampled hot) or a
   * demonstration one (`oracle`, `uitars-oracle`, see DEMONSTRATION_POLICIES).
   */
  policyKind: string;
  /** The episode policy's options (e.g. a VLM campaign's UI-TARS options: model, pixel bounds, coordModel). */
  policyOptions?: Record<string, unknown>;
  endpoints: string[];
  temperature: number;
  /** reward ≥ this is a success (campaign.successThreshold); default 1.0. */
  successThreshold?: number;
  /** env.episodeHeartbeatTimeoutSeconds in ms (absent: the default minute). */
  episodeHeartbeatTimeoutMs?: number;
  /** Successes already pooled per task (from the campaign's stats). */
  alreadyPooled?: Record<string, number>;
  maxSteps?: number;
  /** The campaign's pool keyed by instruction (curation.poolKey), passed to every group. */
  poolByInstruction?: { maxPerTask: number };
}

export interface PrecollectResult {
  perTask: Record<string, { successes: number; attempts: number }>;
}

/** Policies that demonstrate (the task's oracle): their episodes are recorded with source `demo`. */
export const DEMONSTRATION_POLICIES: readonly string[] = ['oracle', 'uitars-oracle'];

export async function precollectWorkflow(input: PrecollectInput): Promise<PrecollectResult> {
  const perTask: PrecollectResult['perTask'] = {};
  const demo = DEMONSTRATION_POLICIES.includes(input.policyKind);
  await Promise.all(
    input.tasks.map(async (task) => {
      const have = { successes: input.alreadyPooled?.[task.id] ?? 0, attempts: 0 };
      perTask[task.id] = have;
      const train = (task.seeds as { train?: { from: number; to: number } } | undefined)?.train ?? {
        from: 0,
        to: 1_000_000,
      };
      let round = 0;
      while (have.successes < input.successesPerTask && have.attempts < input.maxAttemptsPerTask) {
        // A demonstration succeeds every time: run only the successes still wanted.
        const batch = demo ? input.successesPerTask - have.successes : 8;
        const n = Math.min(batch, input.maxAttemptsPerTask - have.attempts);
        const groupId = `${workflowInfo().workflowId}-${task.id}-r${round}`.slice(-190);
        const summary = groupSummaryOf(
          await executeChild(taskGroupWorkflow, {
            workflowId: groupId,
            taskQueue: TASK_QUEUES.orchestrator,
            args: [
              {
                campaignId: input.campaignId,
                groupId,
                task,
                seed: train.from + ((round * 7919) % Math.max(1, train.to - train.from)),
                n,
                maxSteps: input.maxSteps ?? (task as { maxSteps?: number }).maxSteps ?? 30,
                policy: {
                  kind: input.policyKind,
                  endpoints: input.endpoints,
                  temperature: input.temperature,
                  ...(input.policyOptions ? { options: input.policyOptions } : {}),
                },
                experiencePool: false,
                poolWanted: input.successesPerTask - have.successes,
                poolKeep: input.successesPerTask,
                ...(input.poolByInstruction ? { poolByInstruction: input.poolByInstruction } : {}),
                source: demo ? 'demo' : 'precollect',
                ...(input.successThreshold !== undefined ? { successThreshold: input.successThreshold } : {}),
                ...(input.episodeHeartbeatTimeoutMs !== undefined
                  ? { episodeHeartbeatTimeoutMs: input.episodeHeartbeatTimeoutMs }
                  : {}),
              },
            ],
          })
        );
        have.attempts += n;
        have.successes += Math.min(
          summary.trajectories.filter((t) => isSuccess(t.reward, input.successThreshold)).length,
          input.successesPerTask - have.successes
        );
        round++;
      }
    })
  );
  return { perTask };
}
