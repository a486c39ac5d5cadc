/**
 * runEpisode's input and output (Temporal payloads: small, references only). Node-free so workflows
 * can import the types. The task is carried inline (a task file is < 1 KB) and validated again at
 * the activity's entry; a bad task is a non-retryable TaskConfigError.
 */
import { z } from 'zod';
import { EPISODE_STATUSES } from '../../schemas/records';

const idSeg = z.string().regex(/^[A-Za-z0-9._=-]{1,200}$/, 'letters, digits, ".", "_", "=" or "-"');

export const RunEpisodeInputSchema = z.object({
  campaignId: idSeg,
  groupId: idSeg,
  /** Stable across retries of the same episode so a successful retry overwrites the failed attempt's record. */
  trajectoryId: idSeg,
  /** Task spec (validated with TaskSpecSchema inside the activity, to get a TaskConfigError). */
  task: z.unknown(),
  seed: z.number().int().min(0),
  /** Overrides task.maxSteps (DART's dynamic trajectory length). */
  maxSteps: z.number().int().min(1).max(1000).optional(),
  policy: z.object({
    kind: z.string().min(1),
    endpoints: z.array(z.string()).default([]),
    versionHint: z.number().int().nonnegative().optional(),
    temperature: z.number().min(0).max(10).default(1),
    options: z.record(z.string(), z.unknown()).default({}),
  }),
  source: z.enum(['rollout', 'precollect', 'demo']).default('rollout'),
});
export type RunEpisodeInput = z.input<typeof RunEpisodeInputSchema>;
export type RunEpisodeParsed = z.output<typeof RunEpisodeInputSchema>;

export interface RunEpisodeResult {
  trajectoryId: string;
  taskId: string;
  seed: number;
  manifestKey: string;
  /** Binary reward; null only if status is not ok (never happens in a returned result today). */
  reward: number | null;
  status: (typeof EPISODE_STATUSES)[number];
  numSteps: number;
  minPolicyVersion: number;
  maxPolicyVersion: number;
  envKind: string;
  /** The instruction's pool key (instructionKeyOf); absent when the env gave no instruction. */
  instructionKey?: string;
}

/** Heartbeat details: a pointer to the partial trajectory (what a human or a retry may want to look at). */
export interface EpisodeHeartbeat {
  trajectoryId: string;
  step: number;
}
