/**
 * Trainer metrics from the trainStep / behaviourClone results, read by an activity interceptor so the
 * trainer code (activities/trainer/**) stays as it is. Gauges hold the last step's value per campaign;
 * a retried step that reuses a committed checkpoint reports that checkpoint's metrics again. With
 * DARTFLOW_TENSORBOARD_DIR set, the same values also go to TensorBoard (metrics/tensorboard.ts).
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { TrainGroupRef, TrainStepResult } from '../activities/trainer/types';
import { exponentialBuckets, type Gauge, type MetricsRegistry } from './registry';
import { tensorboardFromEnv, trainStepScalars, type TensorBoardScalars } from './tensorboard';

/** Gauge name → key in TrainStepResult.metrics (algorithms/loss.ts and activities/trainer/train-step.ts). */
export const TRAIN_GAUGES: Record<string, { key: string; help: string }> = {
  dartflow_train_loss: {
    key: 'loss',
    help: 'Total loss of the last RL train step (PPO surrogate + KL − entropy bonus)',
  },
  dartflow_train_pg_loss: { key: 'pgLoss', help: 'Policy-gradient (clipped surrogate) part of the loss' },
  dartflow_train_kl: { key: 'kl', help: 'k3 KL to the reference policy, mean over selected steps' },
  dartflow_train_entropy: { key: 'entropyMean', help: 'Mean policy entropy over the step samples' },
  dartflow_train_clip_fraction: { key: 'clipFraction', help: 'Fraction of selected samples whose ratio was clipped' },
  dartflow_train_grad_norm: { key: 'gradNorm', help: 'Mean gradient norm (before clipping) over optimizer updates' },
  dartflow_train_selected_fraction: { key: 'selectedFraction', help: 'Samples kept by the entropy mask / samples' },
  dartflow_train_is_weight_mean: { key: 'isWeightMean', help: 'Mean truncated importance weight' },
  dartflow_train_samples: { key: 'samples', help: 'Step samples in the last train step' },
  dartflow_train_bc_loss: { key: 'bcLoss', help: 'Behaviour-cloning loss (−log π(a_demo|s)) of the last BC step' },
};

const KINDS: Record<string, string> = { trainStep: 'rl', behaviourClone: 'bc' };

export function createTrainerMetrics(
  registry: MetricsRegistry,
  opts: { tensorboard?: TensorBoardScalars } = { tensorboard: tensorboardFromEnv('train') }
): { interceptor: ActivityInterceptorsFactory } {
  const steps = registry.counter(
    'dartflow_train_steps_total',
    'Train steps completed (kind rl = trainStep, bc = behaviourClone; reused = an earlier attempt had committed it)',
    ['campaign', 'kind', 'reused']
  );
  const failures = registry.counter('dartflow_train_step_failures_total', 'Train step attempts that failed', [
    'campaign',
    'kind',
  ]);
  const seconds = registry.histogram(
    'dartflow_train_step_seconds',
    'Wall time of a train step attempt',
    ['kind'],
    exponentialBuckets(0.05, 2, 16)
  );
  const version = registry.gauge('dartflow_train_version', 'Checkpoint version the last train step produced', [
    'campaign',
  ]);
  const gauges: Array<[Gauge<'campaign'>, string]> = Object.entries(TRAIN_GAUGES).map(([name, g]) => [
    registry.gauge(name, g.help, ['campaign']),
    g.key,
  ]);

  const interceptor: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        const kind = KINDS[ctx.info.activityType];
        if (!kind) return next(input);
        const raw = input.args[0] as { campaignId?: unknown; groups?: TrainGroupRef[] } | undefined;
        const campaign = typeof raw?.campaignId === 'string' ? raw.campaignId : 'unknown';
        const t0 = performance.now();
        try {
          const r = (await next(input)) as TrainStepResult;
          steps.inc({ campaign, kind, reused: String(r.reused) });
          version.set({ campaign }, r.version);
          for (const [gauge, key] of gauges) {
            const v = r.metrics?.[key];
            if (typeof v === 'number') gauge.set({ campaign }, v);
          }
          // behaviourClone's input holds demonstrations, not rewarded groups: no batch success.
          opts.tensorboard?.write(
            campaign,
            r.version,
            trainStepScalars(r, kind === 'rl' && Array.isArray(raw?.groups) ? raw.groups : undefined)
          );
          return r;
        } catch (err) {
          failures.inc({ campaign, kind });
          throw err;
        } finally {
          seconds.observe({ kind }, (performance.now() - t0) / 1000);
        }
      },
    },
  });
  return { interceptor };
}
