/**
 * precollectWorkflow — pre-collection of successes for hard tasks (DART §4.8): run groups of attempts at
 * a higher temperature (or with a demonstration policy) until each task has k successes in the
 * experience pool or its attempt budget is spent.
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
  /** 'server' (the current policy, sampled hot) or 'oracle' (imported demonstrations). */
  policyKind: string;
  endpoints: string[];
  temperature: number;
  /** Successes already pooled per task (from the campaign's stats). */
  alreadyPooled?: Record<string, number>;
  maxSteps?: number;
}

export interface PrecollectResult {
  perTask: Record<string, { successes: number; attempts: number }>;
}

export async function precollectWorkflow(input: PrecollectInput): Promise<PrecollectResult> {
  const perTask: PrecollectResult['perTask'] = {};
  const batch = 8;
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
                policy: { kind: input.policyKind, endpoints: input.endpoints, temperature: input.temperature },
                experiencePool: false,
                poolWanted: input.successesPerTask - have.successes,
                source: input.policyKind === 'oracle' ? 'demo' : 'precollect',
              },
            ],
          })
        );
        have.attempts += n;
        have.successes += Math.min(
          summary.trajectories.filter((t) => isSuccess(t.reward)).length,
          input.successesPerTask - have.successes
        );
        round++;
      }
    })
  );
  return { perTask };
}
