/**
 * The policy server's activities, bound to one PolicyEngine (dependency injection: the worker in
 * workers/policy-server.ts registers `createPolicyActivities(...)` on its own queue `policy-<serverId>`).
 * reloadPolicy is idempotent: reloading the served version returns at once with `unchanged: true`.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { CheckpointRejectedError } from '../../rollout/checkpoint';
import type { PolicyEngine } from '../../rollout/engine';
import { StorageUnavailableError } from '../../storage/errors';
import {
  POLICY_FAILURES,
  ReloadPolicyInputSchema,
  type PolicyActivities,
  type PolicyHealthResult,
  type ReloadPolicyResult,
} from './types';

export * from './types';

export interface PolicyActivityDeps {
  engine: PolicyEngine;
  /** The HTTP endpoint of this server (reported by policyHealth). */
  url?: string;
}

function heartbeat(details: unknown): void {
  // Outside an activity (direct calls in tests) there is no context; heartbeats are then moot.
  try {
    Context.current().heartbeat(details);
  } catch {
    /* not in an activity */
  }
}

export function toPolicyFailure(err: unknown): Error {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof CheckpointRejectedError) {
    return ApplicationFailure.create({
      type: POLICY_FAILURES.checkpointRejected,
      message: err.message,
      nonRetryable: true,
      details: [{ reason: err.reason, campaignId: err.campaignId, version: err.version }],
    });
  }
  if (err instanceof StorageUnavailableError) {
    return ApplicationFailure.create({
      type: POLICY_FAILURES.storageUnavailable,
      message: err.message,
      nonRetryable: false,
    });
  }
  const e = err instanceof Error ? err : new Error(String(err));
  return ApplicationFailure.create({ type: e.name || 'PolicyServerError', message: e.message, nonRetryable: false });
}

export function createPolicyActivities(deps: PolicyActivityDeps): PolicyActivities {
  const { engine } = deps;
  return {
    async reloadPolicy(raw): Promise<ReloadPolicyResult> {
      const parsed = ReloadPolicyInputSchema.safeParse(raw);
      if (!parsed.success) {
        const i = parsed.error.issues[0];
        throw ApplicationFailure.create({
          type: POLICY_FAILURES.invalidInput,
          message: `invalid reloadPolicy input at ${i?.path.join('.') ?? ''}: ${i?.message ?? ''}`,
          nonRetryable: true,
        });
      }
      const { campaignId, version } = parsed.data;
      heartbeat({ phase: 'loading', campaignId, version });
      // Keep beating while the load waits on MinIO (the rollout's heartbeat timeout detects a dead server).
      const beat = setInterval(() => heartbeat({ phase: 'loading', campaignId, version }), 5_000);
      try {
        return await engine.reload(campaignId, version);
      } catch (err) {
        throw toPolicyFailure(err);
      } finally {
        clearInterval(beat);
      }
    },
    async policyHealth(): Promise<PolicyHealthResult> {
      return { ...engine.health(), url: deps.url ?? null };
    },
  };
}
