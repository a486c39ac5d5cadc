/**
 * modelRolloutWorkflow — worker-wise model sync (DART §1.5): reload one policy server at a time, canary
 * first; the canary must load and pass a quick greedy evaluation gate before the others follow; a failed
 * load or gate rolls every updated server back to the version it served before. Other servers keep
 * serving throughout, so sampling never stops.
 */
import {
  ActivityFailure,
  executeChild,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  TimeoutFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type { PolicyEndpoint } from '../schemas/campaign';
import { policyQueue } from '../schemas/task-queues';
import { evaluateWorkflow, type EvaluateInput } from './evaluate';
import { modelRolledOutSignal } from './messages';

/** What each policy server's worker exposes on its own queue `policy-<serverId>`. */
export interface PolicyServerActivities {
  reloadPolicy(input: {
    campaignId: string;
    version: number;
  }): Promise<{ serverId: string; version: number; loadMs: number }>;
}

export interface ModelRolloutInput {
  campaignId: string;
  parentWorkflowId?: string;
  version: number;
  servers: PolicyEndpoint[];
  /** serverId → version served before this rollout (the rollback target). */
  servedVersions: Record<string, number>;
  gate: {
    tasks: EvaluateInput['tasks'];
    episodesPerTask: number;
    baseline: number;
    maxDrop: number;
    /** env.episodeHeartbeatTimeoutSeconds in ms (absent: the default minute). */
    episodeHeartbeatTimeoutMs?: number;
  } | null;
  /** Policy kind the gate's episodes use (embedded, uitars), and its options (e.g. the served model name). */
  policyKind?: string;
  policyOptions?: Record<string, unknown>;
  /** policy.reloadPickupTimeoutSeconds in ms (absent: the default minute). */
  reloadPickupTimeoutMs?: number;
}

export interface ModelRolloutResult {
  version: number;
  ok: boolean;
  servedVersions: Record<string, number>;
  /** Servers that never picked their reload up (dead): dropped from the campaign, not a reason to roll back. */
  droppedServers?: string[];
  reason?: string;
}

/** A reload nobody picked up: the server's worker is gone (a live server polls its queue continuously). */
export function isServerGone(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof TimeoutFailure && cause.timeoutType === 'SCHEDULE_TO_START';
}

function reloaderFor(serverId: string, pickupTimeoutMs: number | undefined) {
  return proxyActivities<PolicyServerActivities>({
    taskQueue: policyQueue(serverId),
    // Loading is seconds; a dead server must not block the rollout: a reload nobody picks up within
    // policy.reloadPickupTimeoutSeconds (a minute by default, and for runs recorded before the field) means
    // the server is gone, and it is dropped (isServerGone). The heartbeat timeout turns a server killed
    // mid-reload into a prompt retry (on its restarted process) instead of a 5-minute stall.
    scheduleToStartTimeout: pickupTimeoutMs ?? '1 minute',
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: '1 minute',
    // A refused checkpoint fails at once (→ rollback); a transient failure (MinIO restarting, the server
    // restarting) is retried for about a minute rather than abandoning a good version.
    retry: {
      initialInterval: '1 second',
      maximumInterval: '10 seconds',
      maximumAttempts: 10,
      nonRetryableErrorTypes: ['CheckpointRejectedError'],
    },
  }).reloadPolicy;
}

export async function modelRolloutWorkflow(input: ModelRolloutInput): Promise<ModelRolloutResult> {
  const served = { ...input.servedVersions };
  const updated: PolicyEndpoint[] = [];
  const dropped: string[] = [];
  let result: ModelRolloutResult = { version: input.version, ok: true, servedVersions: served };
  const withDropped = (r: ModelRolloutResult): ModelRolloutResult => {
    for (const id of dropped) delete r.servedVersions[id];
    return dropped.length > 0 ? { ...r, droppedServers: [...dropped] } : r;
  };

  async function rollback(reason: string): Promise<void> {
    for (const server of updated) {
      const previous = input.servedVersions[server.serverId];
      if (previous === undefined) continue;
      try {
        await reloaderFor(
          server.serverId,
          input.reloadPickupTimeoutMs
        )({ campaignId: input.campaignId, version: previous });
        served[server.serverId] = previous;
      } catch (err) {
        if (isServerGone(err)) dropped.push(server.serverId);
        log.error('rollback failed on a server', { serverId: server.serverId, error: String(err) });
      }
    }
    result = { version: input.version, ok: false, servedVersions: served, reason };
  }

  for (const server of input.servers) {
    try {
      await reloaderFor(
        server.serverId,
        input.reloadPickupTimeoutMs
      )({ campaignId: input.campaignId, version: input.version });
    } catch (err) {
      if (isServerGone(err)) {
        // A dead server is taken out; the others still get the new version.
        log.warn('policy server did not answer its reload; dropping it', { serverId: server.serverId });
        dropped.push(server.serverId);
        continue;
      }
      await rollback(`server ${server.serverId} failed to load v${input.version}: ${String(err)}`);
      break;
    }
    served[server.serverId] = input.version;
    updated.push(server);
    if (updated.length === 1 && input.gate) {
      // Quick evaluation gate on the canary alone.
      const point = await executeChild(evaluateWorkflow, {
        workflowId: `${workflowInfo().workflowId}-gate`,
        args: [
          {
            campaignId: input.campaignId,
            version: input.version,
            tasks: input.gate.tasks,
            episodesPerTask: input.gate.episodesPerTask,
            endpoints: [server.url],
            policyKind: input.policyKind ?? 'embedded',
            ...(input.policyOptions ? { policyOptions: input.policyOptions } : {}),
            atEpisodes: 0,
            startedAtMs: 0,
            record: false,
            ...(input.gate.episodeHeartbeatTimeoutMs !== undefined
              ? { episodeHeartbeatTimeoutMs: input.gate.episodeHeartbeatTimeoutMs }
              : {}),
          },
        ],
      });
      // Refuse only a drop beyond maxDrop plus two standard errors of the gate's small sample.
      const b = input.gate.baseline;
      const noise = point.episodes > 0 ? 2 * Math.sqrt((b * (1 - b)) / point.episodes) : 0;
      const floor = b - input.gate.maxDrop - noise;
      if (point.episodes > 0 && point.successRate < floor) {
        await rollback(
          `canary gate failed: success ${point.successRate.toFixed(2)} < ${floor.toFixed(2)} (baseline ${b.toFixed(2)} − ${input.gate.maxDrop} − 2σ)`
        );
        break;
      }
    }
  }
  result = withDropped(result);
  if (input.parentWorkflowId) {
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(modelRolledOutSignal, result);
    } catch (err) {
      log.warn('campaign not reachable for the rollout result', { error: String(err) });
    }
  }
  return result;
}
