/**
 * zod schemas of the records dartflow keeps in MinIO (DESIGN.md "Data in MinIO"). Node-free so
 * workflows can import the types. Every record carries a schemaVersion so readers can refuse what
 * they do not understand instead of half-reading it.
 */
import { z } from 'zod';
import { CanonicalActionSchema } from './actions';

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'a lowercase hex sha256');
const finite = z.number().refine(Number.isFinite, 'a finite number');

/** A reference to an object in the store: what Temporal payloads carry instead of data. */
export const ObjectRefSchema = z.object({
  bucket: z.string().min(3),
  key: z.string().min(1).max(1024),
  sha256: sha256Hex,
  bytes: z.number().int().nonnegative(),
});
export type ObjectRef = z.infer<typeof ObjectRefSchema>;

export const EPISODE_STATUSES = ['ok', 'env_error', 'policy_error', 'parse_error', 'timeout', 'cancelled'] as const;

/** One step of an episode: observation reference, chosen action, and what the policy said about it. */
export const StepRecordSchema = z.object({
  schemaVersion: z.literal(1),
  trajectoryId: z.string().min(1),
  step: z.number().int().nonnegative(),
  /** Content-addressed screenshot key (`screenshots/<sha256>.png`) seen before acting. */
  observationKey: z.string().min(1),
  observationSize: z.object({ width: z.number().int().positive(), height: z.number().int().positive() }),
  /** Parsed canonical action; null when the model output did not parse (a failed action). */
  action: CanonicalActionSchema.nullable(),
  /** UI-TARS text form of the action (or the raw model output when it did not parse). */
  actionText: z.string().max(20_000),
  /** Policy-specific action id (embedded policy: index into its 272 logits). */
  actionIndex: z.number().int().nonnegative().optional(),
  parseError: z.string().optional(),
  /** Behaviour log-probability of the action (sum over tokens for a VLM). */
  behaviourLogProb: finite,
  tokenLogProbs: z.array(finite).optional(),
  /**
   * VLM: the token ids of the response exactly as vLLM generated them (its `token_id:N` logprob answers),
   * one per tokenLogProbs entry. The trainer re-scores these ids, never re-tokenized text.
   */
  responseTokenIds: z.array(z.number().int().nonnegative()).optional(),
  /**
   * VLM: content-addressed key (`prompts/<sha256>.json`, vlm/prompt-record.ts) of
   * `{schemaVersion: 1, messages}`: the OpenAI chat messages vLLM sampled this step from, screenshots inline.
   */
  promptKey: z.string().min(1).optional(),
  /** Mean token entropy (VLM) or categorical entropy (embedded policy); drives top-80% selection. */
  entropy: finite.nonnegative(),
  /** Policy version that produced the action; the staleness bound is checked per step. */
  policyVersion: z.number().int().nonnegative(),
  policyServer: z.string().optional(),
  /** Whether the env executed the action successfully (a malformed action counts as failed). */
  actionOk: z.boolean(),
  startedAt: z.number(),
  endedAt: z.number(),
});
export type StepRecord = z.infer<typeof StepRecordSchema>;

/**
 * Where an episode's time went, measured inside the env activity (benchmarks: env utilization and
 * orchestration overhead). Absolute times are ms since the epoch on the env worker's clock.
 */
export const EpisodeTimingSchema = z.object({
  /** The activity started working on this episode (before waiting for an env slot). */
  queuedAt: z.number(),
  /** An env slot was leased. */
  acquiredAt: z.number(),
  /** Env operations (reset, step, observe, evaluate) as [start, end] pairs; back-to-back ones merged. */
  envIntervals: z.array(z.tuple([z.number(), z.number()])),
  /** Sum of env operation durations. */
  envMs: z.number().nonnegative(),
  /** Policy time: creating the episode policy plus every act() call. */
  actMs: z.number().nonnegative(),
  actCalls: z.number().int().nonnegative(),
  /** Waiting for the screenshot uploads still running when the episode ended (they overlap acting otherwise). */
  uploadWaitMs: z.number().nonnegative(),
  /** The steps.jsonl put (the manifest put after it is not in its own record). */
  stepsWriteMs: z.number().nonnegative(),
  /** The steps.jsonl put overlapped the upload wait (uploadWaitMs covers both); else it followed it. */
  writesParallel: z.boolean().optional(),
  /** Trajectory writes started (the episode's env and policy work was over). */
  writeStartedAt: z.number(),
});
export type EpisodeTiming = z.infer<typeof EpisodeTimingSchema>;

/** A finished trajectory (DART's rollout_run row). Steps live in a separate JSONL object. */
export const TrajectoryManifestSchema = z.object({
  schemaVersion: z.literal(1),
  trajectoryId: z.string().min(1),
  campaignId: z.string().min(1),
  taskId: z.string().min(1),
  /** GRPO group: the episodes of one task and seed. */
  groupId: z.string().min(1),
  seed: z.number().int(),
  instruction: z.string(),
  /** The task's typeable field values (type_field_k types fields[k]); part of the policy's input and mask. */
  fields: z.array(z.string()).default([]),
  /** Evaluator reward, only when status is ok: an infrastructure failure never becomes a reward. */
  reward: finite.nullable(),
  status: z.enum(EPISODE_STATUSES),
  numSteps: z.number().int().nonnegative(),
  maxSteps: z.number().int().positive(),
  /** Versions of the steps' policies (min and max) for the per-sample staleness bound. */
  minPolicyVersion: z.number().int().nonnegative(),
  maxPolicyVersion: z.number().int().nonnegative(),
  stepsKey: z.string().min(1),
  stepsSha256: sha256Hex,
  /** Where it came from: online rollout, pre-collection, or an imported demonstration. */
  source: z.enum(['rollout', 'precollect', 'demo']),
  envKind: z.string(),
  createdAt: z.number(),
  error: z.string().optional(),
  /** Where the episode's time went (absent in records written before it existed). */
  timing: EpisodeTimingSchema.optional(),
});
export type TrajectoryManifest = z.infer<typeof TrajectoryManifestSchema>;

/** Checkpoint manifest: versions form one chain through parentVersion. */
export const CheckpointManifestSchema = z.object({
  schemaVersion: z.literal(1),
  campaignId: z.string().min(1),
  version: z.number().int().nonnegative(),
  parentVersion: z.number().int().nonnegative().nullable(),
  /** Hash of the policy architecture spec: a checkpoint is refused by a session of another shape. */
  specHash: z.string().min(1),
  weights: ObjectRefSchema,
  optimizerState: ObjectRefSchema.optional(),
  /** The train step (ledger entry) that produced this version; absent for the initial checkpoint. */
  ledgerKey: z.string().optional(),
  metrics: z.record(z.string(), finite).default({}),
  createdAt: z.number(),
});
export type CheckpointManifest = z.infer<typeof CheckpointManifestSchema>;

/**
 * One row per trained step sample of a train step (JSON Lines at `keys.trainSamples`, referenced by the
 * ledger entry's `samples`): what the trainer did with each step of each consumed trajectory. Rows are
 * the samples the step trained on (after the staleness bound), in batch order; floats are rounded to 6
 * significant digits to keep the object small (a step has at most a few thousand samples).
 */
export const TrainSampleRecordSchema = z.object({
  trajectoryId: z.string().min(1),
  /** The step's index in its trajectory (StepRecord.step). */
  step: z.number().int().nonnegative(),
  /** Step-wise GRPO advantage (DART §4). */
  advantage: finite,
  /** Kept by the high-entropy step selection (always true when the selection is off). */
  selected: z.boolean(),
  /** Entropy under π_old (the weights the step started from): what the selection ranked. */
  entropy: finite,
  /** log π_old(a|s), recomputed just before the update. */
  logpOld: finite,
  /** log π_behaviour(a|s) as recorded at rollout; null when none was recorded (demonstrations). */
  logpBehaviour: finite.nullable(),
  /** The truncated importance weight the loss used: min(π_old / π_behaviour, C). */
  isWeight: finite,
  /** Versions between the step's policy and the train step's head (along the lineage). */
  staleness: z.number().int().nonnegative(),
});
export type TrainSampleRecord = z.infer<typeof TrainSampleRecordSchema>;

/** Per train step: exactly which trajectories it consumed, with staleness and IS statistics. */
export const LedgerEntrySchema = z.object({
  schemaVersion: z.literal(1),
  campaignId: z.string().min(1),
  trainStep: z.number().int().nonnegative(),
  fromVersion: z.number().int().nonnegative(),
  toVersion: z.number().int().positive(),
  consumed: z
    .array(
      z.object({
        trajectoryId: z.string().min(1),
        manifestKey: z.string().min(1),
        groupId: z.string().min(1),
        reward: finite,
        /** fromVersion − the oldest step version in the trajectory. */
        staleness: z.number().int().nonnegative(),
        injectedFromPool: z.boolean().default(false),
      })
    )
    .min(1),
  /** Groups of the batch left out because an object of theirs was deleted or corrupt in MinIO. */
  skipped: z
    .array(
      z.object({
        groupId: z.string().min(1),
        trajectoryId: z.string(),
        key: z.string().min(1),
        reason: z.string(),
      })
    )
    .optional(),
  isWeight: z.object({ mean: finite, min: finite, truncatedFraction: finite }),
  /**
   * The step's per-sample record (TrainSampleRecordSchema rows, JSON Lines): written by the attempt that
   * trained the checkpoint before it claimed the version. Absent for behaviour cloning and older entries.
   */
  samples: ObjectRefSchema.extend({ rows: z.number().int().nonnegative() }).optional(),
  metrics: z.record(z.string(), finite).default({}),
  /** When the trainer started this step (createdAt is when it committed): trainer utilization. */
  startedAt: z.number().optional(),
  createdAt: z.number(),
});
export type LedgerEntry = z.infer<typeof LedgerEntrySchema>;
