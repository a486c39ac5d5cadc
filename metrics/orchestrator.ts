/**
 * Orchestrator metrics from its data-manager activities (read by an activity interceptor, never from
 * workflow code, which replays): held-out success when an evaluation is recorded, discards when they are.
 * With DARTFLOW_TENSORBOARD_DIR set, each evaluation also goes to TensorBoard (metrics/tensorboard.ts).
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { EvalPoint } from '../schemas/campaign';
import type { MetricsRegistry } from './registry';
import { evalScalars, tensorboardFromEnv, type TensorBoardScalars } from './tensorboard';

export function createOrchestratorMetrics(
  registry: MetricsRegistry,
  opts: { tensorboard?: TensorBoardScalars } = { tensorboard: tensorboardFromEnv('eval') }
): { interceptor: ActivityInterceptorsFactory } {
  const success = registry.gauge(
    'dartflow_eval_success_ratio',
    'Held-out greedy success of the last evaluated version (campaign.successThreshold applies)',
    ['campaign']
  );
  const family = registry.gauge('dartflow_eval_family_success_ratio', 'Held-out success per task family', [
    'campaign',
    'family',
  ]);
  const version = registry.gauge('dartflow_eval_version', 'Policy version of the last evaluation', ['campaign']);
  const evals = registry.counter('dartflow_evals_total', 'Evaluations recorded', ['campaign']);
  const discards = registry.counter(
    'dartflow_discarded_groups_total',
    'Task groups recorded as not trained, by discard event (stale, lost, …)',
    ['campaign', 'event']
  );

  const interceptor: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        const type = ctx.info.activityType;
        if (type !== 'recordEvalPoint' && type !== 'recordDiscards') return next(input);
        const result = await next(input);
        if (type === 'recordEvalPoint') {
          const { campaignId: campaign, point } = input.args[0] as { campaignId: string; point: EvalPoint };
          success.set({ campaign }, point.successRate);
          version.set({ campaign }, point.version);
          evals.inc({ campaign });
          for (const [f, v] of Object.entries(point.perFamily ?? {})) family.set({ campaign, family: f }, v);
          opts.tensorboard?.write(campaign, point.version, evalScalars(point));
        } else {
          const { campaignId: campaign, entries } = input.args[0] as {
            campaignId: string;
            entries: Array<{ event: string }>;
          };
          for (const e of entries ?? []) discards.inc({ campaign, event: String(e.event) });
        }
        return result;
      },
    },
  });
  return { interceptor };
}
