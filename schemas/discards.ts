/**
 * Discard records (`campaigns/<id>/discards/<groupId>-<event>.json`): why completed trajectories of a
 * group were not trained on. With the ledger they account for every trajectory of a campaign. Node-free.
 */
import { z } from 'zod';

/** When the data manager gave trajectories up: at a train step, a stale prune, a failed step, the stop, or lost. */
export const DISCARD_EVENTS = ['train', 'prune', 'failed-step', 'stop', 'lost'] as const;
export type DiscardEvent = (typeof DISCARD_EVENTS)[number];

export const DiscardedTrajectorySchema = z.object({
  trajectoryId: z.string().min(1),
  /** stale | down-sampled | curation:<reason> | train-step-failed | unused-at-stop | lost-infra */
  reason: z.string().min(1),
});
export type DiscardedTrajectory = z.infer<typeof DiscardedTrajectorySchema>;

export const DiscardRecordSchema = z.object({
  schemaVersion: z.literal(1),
  campaignId: z.string().min(1),
  groupId: z.string().min(1),
  taskId: z.string().min(1),
  event: z.enum(DISCARD_EVENTS),
  /** Policy version being trained when the decision was made. */
  policyVersion: z.number().int().nonnegative(),
  trainStep: z.number().int().nonnegative(),
  trajectories: z.array(DiscardedTrajectorySchema).min(1),
  createdAt: z.number(),
});
export type DiscardRecord = z.infer<typeof DiscardRecordSchema>;
