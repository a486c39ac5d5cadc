/**
 * The activities a vLLM policy server's worker registers on its own queue `policy-<serverId>`: the same
 * names, input and result shapes as the embedded policy server's (activities/policy/types.ts), so
 * modelRolloutWorkflow drives both alike. A refused checkpoint is the non-retryable
 * `CheckpointRejectedError`; everything else is retryable (MinIO or vLLM restarting).
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { toPolicyFailure } from '../../activities/policy';
import {
  POLICY_FAILURES,
  ReloadPolicyInputSchema,
  type PolicyActivities,
  type PolicyHealthResult,
  type ReloadPolicyResult,
} from '../../activities/policy/types';
import type { VllmModelManager, ReloadProgress } from './model-manager';
import type { ServingGate } from './serving-gate';

function heartbeat(details: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    /* called outside an activity (tests) */
  }
}

export function createVllmPolicyActivities(deps: {
  serverId: string;
  manager: VllmModelManager;
  gate: ServingGate;
  /** The front's OpenAI base URL (…/v1), reported by policyHealth. */
  url: string;
  /** Called after each successful reload (the registry announcement names the served version at once). */
  onReloaded?: () => Promise<void>;
}): PolicyActivities {
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
      let last: ReloadProgress = { phase: 'fetching', campaignId, version };
      heartbeat(last);
      // Downloading a 7B folder takes a while: keep beating so a dead server is noticed, a busy one is not.
      const beat = setInterval(() => heartbeat(last), 5_000);
      try {
        const result = await deps.manager.reload(campaignId, version, (p) => {
          last = p;
          heartbeat(p);
        });
        await deps.onReloaded?.().catch(() => undefined);
        return result;
      } catch (err) {
        throw toPolicyFailure(err);
      } finally {
        clearInterval(beat);
      }
    },
    async policyHealth(): Promise<PolicyHealthResult> {
      const s = deps.gate.served;
      return {
        serverId: deps.serverId,
        campaignId: s.campaignId,
        version: s.version,
        specHash: `vllm:${s.kind}`,
        queueDepth: 0,
        inFlight: deps.gate.inFlight,
        loading: null,
        lastReloadError: deps.gate.broken ?? deps.manager.lastReloadError,
        batches: 0,
        items: 0,
        maxBatch: 0,
        url: deps.url,
      };
    },
  };
}
