/**
 * describeChildren (orchestrator queue): what became of child workflows a campaign is waiting for. A child
 * that failed, was terminated or timed out never signals its parent, and a campaign run cannot watch the
 * result of children started by an earlier run (before continue-as-new), so the campaign asks here and
 * settles them: a completed child's result is applied like its signal, any other ending counts as lost.
 */
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';

export type ChildEnding =
  'RUNNING' | 'COMPLETED' | 'FAILED' | 'TERMINATED' | 'CANCELLED' | 'TIMED_OUT' | 'NOT_FOUND' | 'OTHER';

export interface ChildDescription {
  workflowId: string;
  status: ChildEnding;
  /** The child's result when COMPLETED (a group summary, train-step outcome, rollout result or eval point). */
  result?: unknown;
}

/** Most children described per call (bounds the activity's time and its result payload). */
export const DESCRIBE_CHILDREN_MAX = 100;

const KNOWN = new Set<ChildEnding>(['RUNNING', 'COMPLETED', 'FAILED', 'TERMINATED', 'CANCELLED', 'TIMED_OUT']);

export function createChildActivities() {
  return {
    async describeChildren(input: { workflowIds: string[] }): Promise<ChildDescription[]> {
      const ctx = Context.current();
      const client = ctx.client;
      const out: ChildDescription[] = [];
      for (const workflowId of input.workflowIds.slice(0, DESCRIBE_CHILDREN_MAX)) {
        ctx.heartbeat(workflowId);
        try {
          const handle = client.workflow.getHandle(workflowId);
          const d = await handle.describe();
          const name = d.status.name as ChildEnding;
          const status: ChildEnding = KNOWN.has(name) ? name : 'OTHER';
          out.push(
            status === 'COMPLETED' ? { workflowId, status, result: await handle.result() } : { workflowId, status }
          );
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) out.push({ workflowId, status: 'NOT_FOUND' });
          else throw err;
        }
      }
      return out;
    },
  };
}
