/**
 * Inputs and results of the policy server's activities (task queue `policy-<serverId>`), Node-free so
 * workflows (modelRolloutWorkflow, campaignWorkflow) import the types and the failure names.
 *
 *   const p = proxyActivities<PolicyActivities>({ taskQueue: policyQueue(serverId), startToCloseTimeout: '2 minutes',
 *     scheduleToCloseTimeout: '5 minutes', retry: { nonRetryableErrorTypes: [...NON_RETRYABLE_POLICY_FAILURES] } });
 *   await p.reloadPolicy({ campaignId, version });
 *
 * Give the proxy a scheduleToCloseTimeout: a server that is down leaves the task in its private queue.
 */
import { z } from 'zod';

export const ReloadPolicyInputSchema = z.object({
  campaignId: z.string().regex(/^[A-Za-z0-9._=-]{1,200}$/, 'letters, digits, ".", "_", "=" or "-"'),
  version: z.number().int().nonnegative(),
});
export type ReloadPolicyInput = z.infer<typeof ReloadPolicyInputSchema>;

export interface ReloadPolicyResult {
  serverId: string;
  campaignId: string;
  version: number;
  previousVersion: number | null;
  loadMs: number;
  /** True when the server already served this version (the call was a no-op). */
  unchanged: boolean;
}

export interface PolicyHealthResult {
  serverId: string;
  campaignId: string | null;
  version: number | null;
  specHash: string;
  queueDepth: number;
  inFlight: number;
  loading: { campaignId: string; version: number } | null;
  lastReloadError: string | null;
  batches: number;
  items: number;
  maxBatch: number;
  /** The server's HTTP endpoint, so a workflow can record which URL serves which version. */
  url: string | null;
}

/**
 * Failure types: a refused checkpoint (corrupt bytes, other architecture, missing objects) and bad
 * input are non-retryable; the failure's details carry `{ reason: 'corrupt' | 'mismatch' | 'not_found' }`.
 */
export const POLICY_FAILURES = {
  checkpointRejected: 'CheckpointRejectedError',
  invalidInput: 'InvalidPolicyInput',
  storageUnavailable: 'StorageUnavailableError',
} as const;
export const NON_RETRYABLE_POLICY_FAILURES = [
  POLICY_FAILURES.checkpointRejected,
  POLICY_FAILURES.invalidInput,
] as const;

export interface PolicyActivities {
  reloadPolicy(input: ReloadPolicyInput): Promise<ReloadPolicyResult>;
  policyHealth(): Promise<PolicyHealthResult>;
}
