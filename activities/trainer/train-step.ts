/**
 * The trainer role: `trainStep` (step-wise GRPO with truncated IS, high-entropy step selection and k3 KL,
 * DART §4) and `behaviourClone` (an optional warm start from demonstrations), both through the same
 * gradient path: recompute log-probs with the current weights → per-sample loss coefficients in JS
 * (algorithms/) → gradients from the generated ONNX backward graph → Adam with gradient clipping → a new
 * checkpoint + ledger entry in MinIO.
 *
 * Idempotent, also under concurrent attempts (commit.ts): a step's ledger entry is its commit record,
 * written only if absent. A retry that finds it returns the checkpoint already written; a retry that finds
 * only the checkpoint (crash between the two writes) completes the ledger entry; two live attempts both
 * return the one checkpoint that claimed the next version, never two children of one parent.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { z } from 'zod';
import {
  adamStep,
  createAdamState,
  createPrng,
  hashSeed,
  isWeightStats,
  NonFiniteGradientError,
  NonFiniteValueError,
  shuffled,
  truncatedIsWeight,
} from '../../algorithms';
import { createTrainSession, packBatch, type PolicyTrainSession } from '../../policy/session';
import { specForPolicy, specKey, type PolicySpec } from '../../policy/spec';
import { cloneWeights } from '../../policy/weights';
import { TrainerSchema } from '../../schemas/config';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import type { ObjectStore } from '../../storage/object-store';
import { CheckpointMismatchError, loadCheckpoint, type LoadedCheckpoint } from './checkpoints';
import { commitTrainStep, committedOrChainReadable } from './commit';
import { grpoUpdate } from './grpo-update';
import { DemoAnchorUnavailableError, loadDemoAnchor, type AnchorRows } from './demo-anchor';
import { loadTrainSamples, type SkippedGroup } from './samples';
import { isAllowedVersion, stalenessOf } from './staleness';
import type { TrainStepInput, TrainStepResult } from './types';

const TrainGroupRefSchema = z.object({
  groupId: z.string().min(1),
  taskId: z.string().min(1),
  trajectories: z
    .array(
      z.object({
        trajectoryId: z.string().min(1),
        manifestKey: z.string().min(1),
        reward: z.number().refine(Number.isFinite, 'finite'),
        injectedFromPool: z.boolean(),
      })
    )
    .min(1),
});
/** The campaign's policy settings a trainer activity needs: the initial weights' seed and the architecture. */
export const PolicyArchInputSchema = z.object({
  seed: z.number().int(),
  width: z.number().int().positive(),
  /** policy.clickMaxContext; absent (= false) in inputs of campaigns from before it. */
  clickMaxContext: z.boolean().optional(),
  /** policy.clickWordQuery; absent (= false) in inputs of campaigns from before it. */
  clickWordQuery: z.boolean().optional(),
  /** policy.hueInput; absent (= false) in inputs of campaigns from before it. */
  hueInput: z.boolean().optional(),
});

/** The trainStep activity's input (also the source of the Python trainer's JSON Schema: scripts/gen-python-schemas.ts). */
export const TrainStepInputSchema = z.object({
  campaignId: z.string().min(1),
  trainStep: z.number().int().positive(),
  fromVersion: z.number().int().nonnegative(),
  groups: z.array(TrainGroupRefSchema).min(1),
  trainer: TrainerSchema,
  maxStaleness: z.number().int().nonnegative(),
  allowedVersions: z.array(z.number().int().nonnegative()).min(1).optional(),
  referenceVersion: z.number().int().nonnegative().default(0),
  policy: PolicyArchInputSchema,
  minStepMs: z.number().nonnegative().max(3_600_000).default(0),
});
export const BehaviourCloneInputSchema = z.object({
  campaignId: z.string().min(1),
  trainStep: z.number().int().positive(),
  fromVersion: z.number().int().nonnegative(),
  demos: z.array(TrainGroupRefSchema).min(1),
  epochs: z.number().int().positive().max(1000),
  learningRate: z.number().positive(),
  minibatchSize: z.number().int().positive().default(64),
  policy: PolicyArchInputSchema,
});
export type BehaviourCloneInput = z.input<typeof BehaviourCloneInputSchema>;

export interface TrainerDeps {
  store: ObjectStore;
  /**
   * The embedded policy's architecture, when it is not the one the input's policy settings select
   * (`policy.width`, `policy.clickMaxContext`: benchmarks such as the issue-14 policy A/B run other specs in
   * the same process). Checkpoints are checked against it as against the selected one.
   */
  spec?: PolicySpec;
  /** ORT intra-op threads for the train session. */
  threads?: number;
  heartbeat?: (details: unknown) => void;
}

/** The embedded policy's spec for a campaign's width setting alone (tests and benches of the default net). */
export const specForWidth = (width: number): PolicySpec => specForPolicy({ width });

function invalid(message: string): never {
  throw ApplicationFailure.create({ type: 'InvalidTrainInput', message, nonRetryable: true });
}

/** Validates an activity input; a bad one is a non-retryable InvalidTrainInput naming the fields. */
function parseInput<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    invalid(`invalid ${what} input: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/** NaN/∞ anywhere in the loss or gradients: the step is refused and the previous checkpoint kept. */
function refuseNonFinite(err: unknown): never {
  if (err instanceof NonFiniteValueError || err instanceof NonFiniteGradientError) {
    throw ApplicationFailure.create({
      type: 'NonFiniteLossError',
      message: `train step refused, previous checkpoint kept: ${err.message}`,
      nonRetryable: true,
    });
  }
  if (err instanceof CheckpointMismatchError) {
    throw ApplicationFailure.create({ type: 'CheckpointMismatchError', message: err.message, nonRetryable: true });
  }
  // Any other checkpoint object gone or damaged (e.g. an older manifest while listing versions).
  if ((err instanceof ObjectNotFoundError || err instanceof CorruptObjectError) && err.key.includes('/checkpoints/')) {
    throw ApplicationFailure.create({
      type: 'CheckpointUnavailableError',
      message: `checkpoint object unusable (${err.message}); the step is refused and nothing new is written`,
      nonRetryable: true,
    });
  }
  throw err;
}

/**
 * A checkpoint the step needs is deleted or damaged in MinIO: a retry cannot bring it back, so the step is
 * refused (non-retryable), nothing new is written, and the error names the object and the way out.
 */
async function readCheckpoint(
  store: ObjectStore,
  campaignId: string,
  version: number,
  spec: PolicySpec,
  role: string
): Promise<LoadedCheckpoint> {
  try {
    return await loadCheckpoint(store, campaignId, version, spec);
  } catch (err) {
    if (err instanceof ObjectNotFoundError || err instanceof CorruptObjectError) {
      const what = err instanceof ObjectNotFoundError ? 'is missing' : 'is corrupt';
      throw ApplicationFailure.create({
        type: 'CheckpointUnavailableError',
        message:
          `${role} checkpoint v${version} of campaign ${campaignId} ${what} (${err.message}); the step is refused ` +
          `and nothing new is written. Restore the object or pin an intact version: dartflow campaign pin ${campaignId} <version>`,
        nonRetryable: true,
      });
    }
    throw err;
  }
}

/** Refuses a batch whose every group was skipped (deleted/corrupt objects), naming what is missing. */
function refuseIfAllSkipped(trainStep: number, groups: number, skipped: readonly SkippedGroup[]): void {
  if (skipped.length < groups) return;
  invalid(
    `train step ${trainStep}: all ${groups} groups reference objects that are gone or corrupt in MinIO ` +
      `(${skipped
        .slice(0, 3)
        .map((g) => `${g.groupId}: ${g.key}`)
        .join('; ')}${skipped.length > 3 ? '; …' : ''}); the previous checkpoint stays current`
  );
}

const sessions = new Map<string, Promise<PolicyTrainSession>>();
function trainSession(spec: PolicySpec, threads: number): Promise<PolicyTrainSession> {
  const k = `${specKey(spec)}/${threads}`;
  let s = sessions.get(k);
  if (!s) sessions.set(k, (s = createTrainSession(spec, { threads })));
  return s;
}

/** Holds a step until `minMs` after `startedAt` (simulated DART-sized trainer), heartbeating meanwhile. */
async function holdUntil(startedAt: number, minMs: number, heartbeat: (d: unknown) => void): Promise<number> {
  const until = startedAt + minMs;
  let waited = 0;
  for (let left = until - Date.now(); left > 0; left = until - Date.now()) {
    const chunk = Math.min(left, 5_000);
    await new Promise((r) => setTimeout(r, chunk));
    waited += chunk;
    heartbeat({ phase: 'simulated-step-time', leftMs: Math.max(0, until - Date.now()) });
  }
  return waited;
}

/** The demonstration anchor's rows; a campaign without a cloning start is refused (non-retryable, fix named). */
async function demoAnchorOf(
  store: ObjectStore,
  spec: PolicySpec,
  at: { campaignId: string; referenceVersion: number; trainStep: number },
  heartbeat: (d: Record<string, unknown>) => void
): Promise<AnchorRows> {
  try {
    return await loadDemoAnchor(store, spec, at.campaignId, at.referenceVersion, (p) =>
      heartbeat({ phase: 'loading-anchor', trainStep: at.trainStep, ...p })
    );
  } catch (err) {
    if (err instanceof DemoAnchorUnavailableError) invalid(err.message);
    throw err;
  }
}

/** A per-sample record value rounded to 6 significant digits (compact JSON, same bytes on every run). */
const compact = (x: number): number => Number(x.toPrecision(6));

export async function runTrainStep(deps: TrainerDeps, raw: TrainStepInput): Promise<TrainStepResult> {
  const input = parseInput(TrainStepInputSchema, raw, 'trainStep');
  if (input.allowedVersions && input.allowedVersions[0] !== input.fromVersion)
    invalid(
      `invalid trainStep input: allowedVersions must start with fromVersion ${input.fromVersion} (the head), got ${input.allowedVersions.join(',')}`
    );
  const { store } = deps;
  const heartbeat = deps.heartbeat ?? (() => undefined);
  const started = Date.now();
  const spec = deps.spec ?? specForPolicy(input.policy);
  try {
    const committed = await committedOrChainReadable(store, input.campaignId, input.trainStep, input.fromVersion);
    if (committed) return committed;
    const current = await readCheckpoint(store, input.campaignId, input.fromVersion, spec, 'current');
    const reference =
      input.trainer.useKl && input.trainer.klBeta > 0
        ? await readCheckpoint(store, input.campaignId, input.referenceVersion, spec, 'KL reference')
        : undefined;
    const loaded = await loadTrainSamples(store, spec, input.groups, {
      onProgress: (p) => heartbeat({ phase: 'loading', trainStep: input.trainStep, ...p }),
    });
    refuseIfAllSkipped(input.trainStep, input.groups.length, loaded.skippedGroups);
    // Staleness bound per step sample (DART §3.4): pooled successes are exempt, as in DART's pool lookup.
    // Along the campaign's lineage when it sends one: data of abandoned versions never trains this line.
    const samples = loaded.samples.filter((s) => s.injectedFromPool || isAllowedVersion(input, s.policyVersion));
    const staleSteps = loaded.samples.length - samples.length;
    if (samples.length === 0)
      invalid(`train step ${input.trainStep}: no fresh, trainable step in ${input.groups.length} groups`);

    // Loaded after the cheap refusals above (the first load reads and decodes hundreds of demos).
    const anchor = input.trainer.demoAnchorCoef > 0 ? await demoAnchorOf(store, spec, input, heartbeat) : undefined;
    const session = await trainSession(spec, deps.threads ?? 1);
    const weights = cloneWeights(current.weights);
    const cfg = input.trainer;
    // Adam moments: carried from the parent checkpoint, or fresh — at the first RL step (the parent is the
    // reference: BC's moments come from a different loss) or at every step (issue 14's sweep measures both).
    const freshOptimizer =
      !current.optimizer ||
      cfg.optimizerReset === 'every-step' ||
      (cfg.optimizerReset === 'rl-start' && input.fromVersion === input.referenceVersion);
    const optimizer = freshOptimizer ? createAdamState(weights) : current.optimizer!;

    const update = await grpoUpdate({
      session,
      spec,
      weights,
      optimizer,
      samples,
      trainer: cfg,
      ...(reference ? { referenceWeights: reference.weights } : {}),
      ...(anchor ? { anchor: anchor.samples } : {}),
      rng: createPrng(hashSeed(`${input.campaignId}/${input.trainStep}`)),
      heartbeat: (d) => heartbeat({ ...d, trainStep: input.trainStep }),
    });
    const { old, selection } = update;
    const adv = update.advantages;
    const isWeights = samples.map((s, i) => truncatedIsWeight(old.logp[i]!, s.behaviourLogProb, cfg.tisCap));
    const isStats = isWeightStats(isWeights);
    const metrics: Record<string, number> = {
      ...update.metrics,
      freshOptimizer: freshOptimizer ? 1 : 0,
      samples: samples.length,
      staleSteps,
      skippedSteps: loaded.skippedSteps,
      skippedGroups: loaded.skippedGroups.length,
      isWeightMean: isStats.mean,
      isWeightMin: isStats.min,
      isWeightTruncatedFraction: isStats.truncatedFraction,
      ...(anchor ? { anchorRows: anchor.samples.length, anchorSkippedGroups: anchor.skippedGroups } : {}),
      samplesPerSecond: (samples.length * cfg.epochs) / Math.max(1e-3, (Date.now() - started) / 1000),
    };
    const simulatedWaitMs = await holdUntil(started, input.minStepMs, heartbeat);
    if (input.minStepMs > 0) metrics.simulatedWaitMs = simulatedWaitMs;
    return await commitTrainStep(store, {
      campaignId: input.campaignId,
      trainStep: input.trainStep,
      fromVersion: input.fromVersion,
      spec,
      weights,
      optimizer,
      metrics,
      groups: input.groups,
      minVersions: loaded.minVersions,
      staleness: (v: number) => stalenessOf(input, v),
      skipped: loaded.skippedGroups,
      isWeight: { mean: isStats.mean, min: isStats.min, truncatedFraction: isStats.truncatedFraction },
      samples: samples.map((s, i) => ({
        trajectoryId: s.trajectoryId,
        step: s.step,
        advantage: compact(adv[i]!),
        selected: selection[i] === 1,
        entropy: compact(old.entropy[i]!),
        logpOld: compact(old.logp[i]!),
        logpBehaviour: s.behaviourLogProb === null ? null : compact(s.behaviourLogProb),
        // The weight the loss multiplied in: 1 when truncated IS is off (algorithms/loss.ts).
        isWeight: cfg.useTis ? compact(isWeights[i]!.weight) : 1,
        staleness: stalenessOf(input, s.policyVersion),
      })),
      startedAt: started,
    });
  } catch (err) {
    refuseNonFinite(err);
  }
}

/** Behaviour cloning from demonstrations: minimise −log π(a_demo|s) through the same gradient path. */
export async function runBehaviourClone(deps: TrainerDeps, raw: BehaviourCloneInput): Promise<TrainStepResult> {
  const input = parseInput(BehaviourCloneInputSchema, raw, 'behaviourClone');
  const { store } = deps;
  const heartbeat = deps.heartbeat ?? (() => undefined);
  const spec = deps.spec ?? specForPolicy(input.policy);
  try {
    const committed = await committedOrChainReadable(store, input.campaignId, input.trainStep, input.fromVersion);
    if (committed) return committed;
    const current = await readCheckpoint(store, input.campaignId, input.fromVersion, spec, 'current');
    const loaded = await loadTrainSamples(store, spec, input.demos, {
      usePolicyIndex: false,
      onProgress: (p) => heartbeat({ phase: 'loading', trainStep: input.trainStep, ...p }),
    });
    refuseIfAllSkipped(input.trainStep, input.demos.length, loaded.skippedGroups);
    const samples = loaded.samples;
    if (samples.length === 0) invalid('behaviourClone: the demonstrations hold no step the policy can express');
    const session = await trainSession(spec, deps.threads ?? 1);
    const weights = cloneWeights(current.weights);
    const optimizer = createAdamState(weights);
    const rng = createPrng(hashSeed(`${input.campaignId}/bc/${input.trainStep}`));
    let lossSum = 0;
    let updates = 0;
    let gradNormSum = 0;
    for (let epoch = 0; epoch < input.epochs; epoch++) {
      const order = shuffled(
        samples.map((_, i) => i),
        rng
      );
      for (let start = 0; start < order.length; start += input.minibatchSize) {
        const rows = order.slice(start, start + input.minibatchSize).map((i) => samples[i]!);
        const n = rows.length;
        const { logpAction, grads } = await session.gradients(weights, {
          ...packBatch(spec, rows),
          actions: rows.map((r) => r.action),
          g: new Float32Array(n).fill(-1 / n),
          entCoef: new Float32Array(n),
        });
        lossSum += -logpAction.reduce((a, b) => a + b, 0) / n;
        const step = adamStep(weights, grads, optimizer, {
          learningRate: input.learningRate,
          weightDecay: 0,
          maxGradNorm: 2.0,
        });
        gradNormSum += step.gradNorm;
        updates++;
        heartbeat({ phase: 'bc', epoch, minibatch: updates });
      }
    }
    return await commitTrainStep(store, {
      campaignId: input.campaignId,
      trainStep: input.trainStep,
      fromVersion: input.fromVersion,
      spec,
      weights,
      optimizer,
      metrics: {
        bcLoss: lossSum / Math.max(1, updates),
        gradNorm: gradNormSum / Math.max(1, updates),
        samples: samples.length,
        optimizerSteps: updates,
      },
      groups: input.demos,
      minVersions: loaded.minVersions,
      skipped: loaded.skippedGroups,
      isWeight: { mean: 1, min: 1, truncatedFraction: 0 },
    });
  } catch (err) {
    refuseNonFinite(err);
  }
}

/** Activities of the `trainer` task queue. */
export function createTrainerActivities(deps: Omit<TrainerDeps, 'heartbeat'>) {
  const withHeartbeat = (): TrainerDeps => ({ ...deps, heartbeat: (d) => Context.current().heartbeat(d) });
  return {
    async trainStep(input: TrainStepInput): Promise<TrainStepResult> {
      return runTrainStep(withHeartbeat(), input);
    },
    async behaviourClone(input: BehaviourCloneInput): Promise<TrainStepResult> {
      return runBehaviourClone(withHeartbeat(), input);
    },
  };
}
