/**
 * The campaign's control plane: Updates (validated request/response), Queries (read-only) and the
 * Signals children use to report back. Names are stable API (the Temporal UI and CLI use them).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CampaignStatus, EvalPoint, GroupSummary, TaskStats } from '../schemas/campaign';
import type { TaskGroupInput } from './task-group';

export interface SetConfigInput {
  /** "section.field=value" overrides of live-tunable fields (see LIVE_TUNABLE_FIELDS). */
  overrides: Record<string, number | boolean | string>;
}
export interface QuarantineInput {
  taskId: string;
  quarantined: boolean;
}
export interface InjectSuccessInput {
  taskId: string;
  /** Manifest key of a successful trajectory (or demonstration) already in MinIO. */
  manifestKey: string;
}
export interface PinCheckpointInput {
  /** Serve and train from this version; null unpins. */
  version: number | null;
}

export const pauseUpdate = defineUpdate<CampaignStatus, []>('pause');
export const resumeUpdate = defineUpdate<CampaignStatus, []>('resume');
export const stopUpdate = defineUpdate<CampaignStatus, []>('stop');
export const setConfigUpdate = defineUpdate<CampaignStatus, [SetConfigInput]>('setConfig');
export const quarantineTaskUpdate = defineUpdate<TaskStats, [QuarantineInput]>('quarantineTask');
export const injectSuccessUpdate = defineUpdate<TaskStats, [InjectSuccessInput]>('injectSuccess');
export const pinCheckpointUpdate = defineUpdate<CampaignStatus, [PinCheckpointInput]>('pinCheckpoint');

export const statusQuery = defineQuery<CampaignStatus>('status');
export const taskStatsQuery = defineQuery<TaskStats[]>('taskStats');

/** Sent by taskGroupWorkflow children to the campaign (by workflow id, so it reaches the latest run). */
export const groupFinishedSignal = defineSignal<[GroupSummary]>('groupFinished');
/**
 * Scheduler shards (rollout.schedulerShards > 1; workflows/rollout-shard.ts): the campaign assigns a batch of
 * group starts to a shard, the shard reports finished and lost groups back in batches, and is told to stop
 * when the campaign ends.
 */
export const assignGroupsSignal = defineSignal<[TaskGroupInput[]]>('assignGroups');
export interface GroupsFinishedReport {
  shardId: string;
  finished: GroupSummary[];
  /** Groups that ended without a summary (failed, terminated, could not start). */
  lost: Array<{ groupId: string; why: string }>;
}
export const groupsFinishedSignal = defineSignal<[GroupsFinishedReport]>('groupsFinished');
export const stopShardSignal = defineSignal('stopShard');
/**
 * A shard runs its groups in rollout lanes (workflows/rollout-lane.ts): it hands a lane groups with
 * assignGroups, the lane reports with groupsFinished (shardId = the lane's id), and once the lane has had
 * its share of episodes the shard seals it (no more groups; it finishes what it runs and completes).
 */
export const sealLaneSignal = defineSignal('sealLane');
/** The group ids a shard is responsible for now (queued, running in its lanes, or in a report not yet sent). */
export const groupsHeldQuery = defineQuery<string[]>('groupsHeld');
/** Sent by evaluateWorkflow children. */
export const evalFinishedSignal = defineSignal<[EvalPoint]>('evalFinished');
/** Sent by modelRolloutWorkflow children when a version is served (or rolled back). */
export const modelRolledOutSignal = defineSignal<
  [
    {
      version: number;
      ok: boolean;
      servedVersions: Record<string, number>;
      droppedServers?: string[];
      reason?: string;
    },
  ]
>('modelRolledOut');

/** What a train step child reports (its result, and the signal it sends the campaign). */
export interface TrainStepOutcome {
  workflowId: string;
  trainStep: number;
  fromVersion: number;
  ok: boolean;
  version?: number;
  metrics?: Record<string, number>;
  error?: string;
}
/** Sent by trainStepWorkflow children (by workflow id, so it reaches the campaign's latest run). */
export const trainStepFinishedSignal = defineSignal<[TrainStepOutcome]>('trainStepFinished');

/** Config fields a running campaign accepts through setConfig (others need a new campaign). */
export const LIVE_TUNABLE_FIELDS = [
  'rollout.nMax',
  'rollout.nMin',
  'rollout.dynamicRollout',
  'rollout.successRateThreshold',
  'rollout.maxSteps',
  'rollout.dynamicMaxSteps',
  'rollout.temperature',
  'rollout.envConcurrency',
  'curation.maxStaleness',
  'curation.experiencePool',
  'trainer.learningRate',
  'trainer.klBeta',
  'trainer.entropyTopFraction',
  'trainer.useEntropySelection',
  'trainer.useTis',
  'trainer.useKl',
  'trainer.useClip',
  'trainer.minGroups',
  'trainer.maxGroups',
  'trainer.heartbeatTimeoutSeconds',
  'env.episodeHeartbeatTimeoutSeconds',
  'policy.reloadPickupTimeoutSeconds',
  'campaign.maxTrainSteps',
  'campaign.maxEpisodes',
  'campaign.targetSuccess',
  'eval.everyVersions',
  'eval.sparseEveryVersions',
  'eval.sparseBelowRolloutSuccess',
  'eval.nearTargetEveryVersions',
  'eval.nearTargetMargin',
] as const;
