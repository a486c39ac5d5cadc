/**
 * Small records that flow between the campaign workflow, its children and activities (Node-free).
 * They are summaries and references only: trajectories themselves stay in MinIO.
 */
import { z } from 'zod';

export const TrajectorySummarySchema = z.object({
  trajectoryId: z.string(),
  manifestKey: z.string(),
  taskId: z.string(),
  groupId: z.string(),
  /** null when the episode failed for infrastructure reasons (never trained on, never a fake 0). */
  reward: z.number().nullable(),
  status: z.string(),
  numSteps: z.number().int().nonnegative(),
  minPolicyVersion: z.number().int().nonnegative(),
  maxPolicyVersion: z.number().int().nonnegative(),
  injectedFromPool: z.boolean().default(false),
  /**
   * 16 hex digits of the sha256 of the episode's instruction (activities/env/instruction-key.ts): the pool
   * keyed by instruction (curation.poolKey) matches on it. Absent for episodes recorded before it existed.
   */
  instructionKey: z
    .string()
    .regex(/^[0-9a-f]{16}$/)
    .optional(),
});
export type TrajectorySummary = z.infer<typeof TrajectorySummarySchema>;

export const GroupSummarySchema = z.object({
  groupId: z.string(),
  taskId: z.string(),
  seed: z.number().int(),
  requested: z.number().int().positive(),
  maxSteps: z.number().int().positive(),
  trajectories: z.array(TrajectorySummarySchema),
  /** Episodes lost to infrastructure failures after all retries (reported, not trained on). */
  infraFailures: z.number().int().nonnegative(),
  /** Their trajectory ids (recorded as discards, so an attempt's leftover record is accounted for). */
  lostTrajectoryIds: z.array(z.string()).optional(),
  startedAt: z.number(),
  endedAt: z.number(),
});
export type GroupSummary = z.infer<typeof GroupSummarySchema>;

export const PolicyEndpointSchema = z.object({
  serverId: z.string().min(1),
  url: z.url(),
});
export type PolicyEndpoint = z.infer<typeof PolicyEndpointSchema>;

export interface TaskStats {
  taskId: string;
  /** Rewards of the latest episodes, newest last (bounded window). */
  recentRewards: number[];
  episodes: number;
  successes: number;
  /** n last assigned to this task (DART's n_prev). */
  lastN: number;
  /** Longest successful episode in steps (dynamic max steps), 0 when none. */
  longestSuccess: number;
  hard: boolean;
  quarantined: boolean;
  poolSize: number;
  /** Round-robin turns this solved task has passed up since it last took one (rollout.solvedTaskEvery > 1). */
  turnsPassed?: number;
  /** Smooth weighted round robin credit (rollout.taskTurns 'signal'); absent under round robin. */
  turnCredit?: number;
  /** Per recent group, newest last: 1 if it passed curation (rollout.taskTurns 'signal' only). */
  recentGroupsTaught?: number[];
}

export interface EvalPoint {
  version: number;
  successRate: number;
  episodes: number;
  /** Episodes of rollouts done when this version was evaluated (for curves vs episodes). */
  atEpisodes: number;
  /** Milliseconds since campaign start. */
  atMs: number;
  perFamily: Record<string, number>;
  /**
   * Temperature-1 success over the same held-out seeds, next to the greedy numbers above (absent on points
   * recorded before it, and on replays of evaluations that started before it).
   */
  sampledSuccessRate?: number;
  sampledPerFamily?: Record<string, number>;
  sampledEpisodes?: number;
  /** Greedy episodes per family (the stop rule's targetMinEpisodesPerFamily needs enough of them). */
  episodesPerFamily?: Record<string, number>;
}

export type CampaignPhase =
  'starting' | 'warm-start' | 'precollecting' | 'running' | 'paused' | 'draining' | 'completed' | 'failed';

export interface CampaignStatus {
  campaignId: string;
  phase: CampaignPhase;
  mode: 'async' | 'sync';
  policyVersion: number;
  servedVersions: Record<string, number>;
  pinnedVersion: number | null;
  episodes: number;
  trainSteps: number;
  groupsInFlight: number;
  episodesInFlight: number;
  bufferedGroups: number;
  /** A train step is running on the trainer right now. */
  trainInFlight: boolean;
  recentSuccessRate: number;
  lastEval: EvalPoint | null;
  evals: EvalPoint[];
  infraFailures: number;
  rolledBack: number;
  staleDropped: number;
  startedAtMs: number;
  runIndex: number;
}
