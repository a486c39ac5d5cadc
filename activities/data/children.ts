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

export interface DescribeChildrenInput {
  workflowIds: string[];
  /**
   * Scheduler shards that may hold some of these ids as groups run in their rollout lanes (workflows/
   * rollout-lane.ts), where a group is no workflow of its own. A running shard is asked (groupsHeld query)
   * first; a group it holds is RUNNING.
   */
  heldBy?: string[];
}

export function createChildActivities() {
  return {
    async describeChildren(input: DescribeChildrenInput): Promise<ChildDescription[]> {
      const ctx = Context.current();
      const client = ctx.client;
      const out: ChildDescription[] = [];
      const held = new Set<string>();
      for (const shardId of input.heldBy ?? []) {
        ctx.heartbeat(shardId);
        const shard = client.workflow.getHandle(shardId);
        try {
          // Only a running shard is asked: a query to a closed one replays its whole history on a worker.
          if ((await shard.describe()).status.name !== 'RUNNING') continue;
          for (const id of await shard.query<string[]>('groupsHeld')) held.add(id);
        } catch (err) {
          // Gone, ended between the two calls, or running code from before lanes (no such query; its groups
          // are workflows of their own): the groups are described below.
          if (
            err instanceof WorkflowNotFoundError ||
            /not running|completed|closed|did not register a handler|QueryNotRegistered/i.test(String(err))
          )
            continue;
          throw err;
        }
      }
      for (const workflowId of input.workflowIds) if (held.has(workflowId)) out.push({ workflowId, status: 'RUNNING' });
      const rest = input.workflowIds.filter((id) => !held.has(id));
      for (const workflowId of rest.slice(0, DESCRIBE_CHILDREN_MAX)) {
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
