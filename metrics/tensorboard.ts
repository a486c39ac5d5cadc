/**
 * Optional TensorBoard scalars (docs/metrics.md "TensorBoard"): with DARTFLOW_TENSORBOARD_DIR set, the
 * trainer writes each train step's metrics and the orchestrator each held-out evaluation to tfevents
 * files (lib/tensorboard.ts), one run per campaign and role:
 *
 *   $DARTFLOW_TENSORBOARD_DIR/<campaign>/train/events.out.tfevents.…   loss, KL, entropy, clip fraction, TIS, batch success
 *   $DARTFLOW_TENSORBOARD_DIR/<campaign>/eval/events.out.tfevents.…    held-out success (greedy, temperature 1, per family)
 *
 * The step axis is the policy version a train step produced (or an evaluation evaluated), so both runs
 * line up. The values come from the same activity interceptors as the Prometheus metrics
 * (metrics/trainer.ts, metrics/orchestrator.ts). A failed write is logged once and never fails a step.
 */
import path from 'node:path';
import { TensorBoardWriter } from '../lib/tensorboard';
import type { TrainStepResult, TrainGroupRef } from '../activities/trainer/types';
import type { EvalPoint } from '../schemas/campaign';

export const TENSORBOARD_DIR_VARIABLE = 'DARTFLOW_TENSORBOARD_DIR';

/** TrainStepResult.metrics key → TensorBoard tag. Keys a step does not report are left out. */
export const TRAIN_SCALAR_TAGS: Record<string, string> = {
  loss: 'train/loss',
  pgLoss: 'train/pg_loss',
  kl: 'train/kl',
  entropyMean: 'train/entropy',
  clipFraction: 'train/clip_fraction',
  dualClipFraction: 'train/dual_clip_fraction',
  ratioMean: 'train/ratio_mean',
  selectedFraction: 'train/selected_fraction',
  gradNorm: 'train/grad_norm',
  samples: 'train/samples',
  staleSteps: 'train/stale_steps',
  isWeightMean: 'tis/weight_mean',
  isWeightMin: 'tis/weight_min',
  isWeightTruncatedFraction: 'tis/truncated_fraction',
  bcLoss: 'bc/loss',
};

/**
 * The scalars of one train step: its metrics under TRAIN_SCALAR_TAGS, and the success of the batch it
 * trained (`train/batch_success`: trajectories with reward ≥ successThreshold, default 1.0 as everywhere
 * in dartflow; `train/batch_reward_mean`), from the step's input groups.
 */
export function trainStepScalars(
  result: Pick<TrainStepResult, 'metrics'>,
  groups: readonly Pick<TrainGroupRef, 'trajectories'>[] | undefined,
  successThreshold = 1.0
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, tag] of Object.entries(TRAIN_SCALAR_TAGS)) {
    const v = result.metrics?.[k];
    if (typeof v === 'number') out[tag] = v;
  }
  // Defensive: the interceptor reads the raw activity input (a malformed one must not fail a step that succeeded).
  const rewards = (groups ?? [])
    .flatMap((g) => (Array.isArray(g?.trajectories) ? g.trajectories : []).map((t) => t?.reward))
    .filter((r): r is number => typeof r === 'number' && Number.isFinite(r));
  if (rewards.length > 0) {
    out['train/batch_success'] = rewards.filter((r) => r >= successThreshold).length / rewards.length;
    out['train/batch_reward_mean'] = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  }
  return out;
}

/** The scalars of one held-out evaluation. */
export function evalScalars(point: EvalPoint): Record<string, number> {
  const out: Record<string, number> = { 'eval/success': point.successRate, 'eval/episodes': point.episodes };
  if (point.sampledSuccessRate !== undefined) out['eval/sampled_success'] = point.sampledSuccessRate;
  for (const [f, v] of Object.entries(point.perFamily ?? {})) out[`eval/success/${f}`] = v;
  for (const [f, v] of Object.entries(point.sampledPerFamily ?? {})) out[`eval/sampled_success/${f}`] = v;
  return out;
}

/** A campaign id as one directory name (ids are already key-safe; this only guards the path). */
const dirName = (campaignId: string): string => campaignId.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_') || '_';

/** One writer per campaign, opened at its first scalar, in `<root>/<campaign>/<run>`. */
export class TensorBoardScalars {
  private readonly writers = new Map<string, TensorBoardWriter>();
  private warned = false;

  constructor(
    readonly root: string,
    readonly run: 'train' | 'eval',
    private readonly log: (line: string) => void = (line) => console.warn(line)
  ) {}

  /** The event file of a campaign (undefined before its first scalar). */
  fileOf(campaignId: string): string | undefined {
    return this.writers.get(campaignId)?.file;
  }

  write(campaignId: string, step: number, values: Record<string, number>): void {
    try {
      let w = this.writers.get(campaignId);
      if (!w) {
        w = new TensorBoardWriter(path.join(this.root, dirName(campaignId), this.run));
        this.writers.set(campaignId, w);
      }
      w.scalars(step, values);
    } catch (err) {
      if (this.warned) return;
      this.warned = true;
      this.log(
        `[tensorboard] cannot write scalars under ${this.root} (further failures are not logged): ${String(err)}`
      );
    }
  }

  close(): void {
    for (const w of this.writers.values()) w.close();
    this.writers.clear();
  }
}

/** The writer of a role when DARTFLOW_TENSORBOARD_DIR is set (a relative path is from the working directory). */
export function tensorboardFromEnv(
  run: 'train' | 'eval',
  env: NodeJS.ProcessEnv = process.env
): TensorBoardScalars | undefined {
  const dir = env[TENSORBOARD_DIR_VARIABLE]?.trim();
  return dir ? new TensorBoardScalars(path.resolve(dir), run) : undefined;
}
