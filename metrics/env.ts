/**
 * The env worker's metrics, observed from outside the episode code: an activity interceptor sees each
 * runEpisode / runEpisodes result (outcome per episode), a pool wrapper sees every slot acquire and
 * release (exact busy time), and a policy-factory wrapper times every act() the env waits for.
 */
import { CancelledFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { RunEpisodeResult } from '../activities/env/input';
import type { PolicyFactory } from '../activities/env/policy';
import type { EpisodeOutcome } from '../activities/env/run-episode';
import type { EnvPool, GuiEnv } from '../envs/types';
import { isSuccess } from '../algorithms/success';
import { parseTaskSpec } from '../tasks/loader';
import { exponentialBuckets, type MetricsRegistry } from './registry';

/**
 * success: reward ≥ 1.0 (the default campaign.successThreshold, algorithms/success.ts; the env worker
 * does not know a campaign's own threshold). failure: a finished episode below it. error: the attempt failed (env or infra
 * trouble, retried by Temporal, never a reward). cancelled: the workflow cancelled it.
 */
export type EpisodeOutcomeLabel = 'success' | 'failure' | 'error' | 'cancelled';

export interface EnvMetrics {
  interceptor: ActivityInterceptorsFactory;
  /** The same pool, with every acquire/release counted. */
  wrapPool(pool: EnvPool): EnvPool;
  /** The same factories, with every act() timed. */
  wrapPolicies(policies: Record<string, PolicyFactory>): Record<string, PolicyFactory>;
}

type EpisodeLabels = { campaign: string; source: string; family: string };

function episodeLabels(raw: unknown): EpisodeLabels {
  const input = (raw ?? {}) as { campaignId?: unknown; source?: unknown; task?: unknown };
  let family = 'unknown';
  try {
    family = parseTaskSpec(input.task).family;
  } catch {
    // a bad task fails the activity itself; here it only loses its family label
  }
  return {
    campaign: typeof input.campaignId === 'string' ? input.campaignId : 'unknown',
    source: typeof input.source === 'string' ? input.source : 'rollout',
    family,
  };
}

export function outcomeOf(result: Pick<RunEpisodeResult, 'status' | 'reward'>): EpisodeOutcomeLabel | string {
  if (result.status !== 'ok') return result.status;
  return isSuccess(result.reward) ? 'success' : 'failure';
}

export function createEnvMetrics(registry: MetricsRegistry): EnvMetrics {
  const episodes = registry.counter(
    'dartflow_episodes_total',
    'Episode attempts finished on this env worker, by outcome (success = reward >= 1; error = failed attempt, retried)',
    ['campaign', 'source', 'family', 'outcome']
  );
  const steps = registry.histogram(
    'dartflow_episode_steps',
    'Steps per finished episode',
    ['campaign'],
    [1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100]
  );
  const reward = registry.counter('dartflow_episode_reward_total', 'Sum of the rewards of finished episodes', [
    'campaign',
  ]);
  const actSeconds = registry.histogram(
    'dartflow_policy_act_seconds',
    'Policy latency as the env sees it: one act() call (network, queueing and inference), by policy kind and the server that answered (embedded: its id; vLLM: its front URL)',
    ['kind', 'outcome', 'server'],
    exponentialBuckets(0.0005, 2, 18)
  );
  const slots = registry.gauge('dartflow_env_slots_total', 'Env slots of this worker');
  const busy = registry.gauge('dartflow_env_slots_busy', 'Env slots running an episode now');
  const waiting = registry.gauge('dartflow_env_episodes_waiting', 'Episodes waiting for a free env slot now');
  const fraction = registry.gauge('dartflow_env_busy_fraction', 'Busy slots / slots, now');
  const busySeconds = registry.counter(
    'dartflow_env_busy_seconds_total',
    'Slot-seconds spent busy; rate() / dartflow_env_slots_total is the exact busy fraction over a window'
  );

  const count = (labels: EpisodeLabels, outcome: string, r?: RunEpisodeResult) => {
    episodes.inc({ ...labels, outcome });
    if (r) {
      steps.observe({ campaign: labels.campaign }, r.numSteps);
      if (r.reward !== null && r.reward > 0) reward.inc({ campaign: labels.campaign }, r.reward);
    }
  };

  const interceptor: ActivityInterceptorsFactory = (ctx) => ({
    inbound: {
      async execute(input, next) {
        const type = ctx.info.activityType;
        if (type !== 'runEpisode' && type !== 'runEpisodes') return next(input);
        if (type === 'runEpisode') {
          const labels = episodeLabels(input.args[0]);
          try {
            const r = (await next(input)) as RunEpisodeResult;
            count(labels, outcomeOf(r), r);
            return r;
          } catch (err) {
            count(labels, err instanceof CancelledFailure ? 'cancelled' : 'error');
            throw err;
          }
        }
        const list = ((input.args[0] as { episodes?: unknown[] } | undefined)?.episodes ?? []).map(episodeLabels);
        try {
          const outcomes = (await next(input)) as EpisodeOutcome[];
          outcomes.forEach((o, i) => {
            const labels = list[i] ?? episodeLabels(undefined);
            if (o.ok) count(labels, outcomeOf(o.result), o.result);
            else count(labels, 'error');
          });
          return outcomes;
        } catch (err) {
          const outcome = err instanceof CancelledFailure ? 'cancelled' : 'error';
          for (const labels of list) count(labels, outcome);
          throw err;
        }
      },
    },
  });

  const wrapPool = (pool: EnvPool): EnvPool => {
    // Busy slot-seconds, integrated exactly: accumulated at every change of the busy count and at scrape.
    let last = performance.now();
    let busyNow = 0;
    const advance = () => {
      const t = performance.now();
      busySeconds.inc({}, (busyNow * (t - last)) / 1000);
      last = t;
      busyNow = pool.stats().busy;
    };
    slots.collect(() => [{ labels: {}, value: pool.slots }]);
    // Registered before busySeconds, so this runs first at scrape and the counter is current when rendered.
    busy.collect(() => {
      advance();
      return [{ labels: {}, value: pool.stats().busy }];
    });
    waiting.collect(() => [{ labels: {}, value: pool.stats().waiting }]);
    fraction.collect(() => [{ labels: {}, value: pool.slots ? pool.stats().busy / pool.slots : 0 }]);
    return {
      get kind() {
        return pool.kind;
      },
      get slots() {
        return pool.slots;
      },
      async acquire(signal?: AbortSignal): Promise<GuiEnv> {
        const env = await pool.acquire(signal);
        advance();
        return env;
      },
      async release(env: GuiEnv, opts?: { broken?: boolean }): Promise<void> {
        try {
          await pool.release(env, opts);
        } finally {
          advance();
        }
      },
      stats: () => pool.stats(),
      close: () => pool.close(),
    };
  };

  const wrapPolicies = (policies: Record<string, PolicyFactory>): Record<string, PolicyFactory> =>
    Object.fromEntries(
      Object.entries(policies).map(([kind, factory]): [string, PolicyFactory] => [
        kind,
        async (ctx) => {
          const policy = await factory(ctx);
          return {
            ...(policy.close ? { close: () => policy.close!() } : {}),
            async act(obs, opts) {
              const t0 = performance.now();
              let outcome = 'ok';
              let server = '';
              try {
                const decision = await policy.act(obs, opts);
                server = decision.policyServer ?? '';
                return decision;
              } catch (err) {
                outcome = 'error';
                throw err;
              } finally {
                actSeconds.observe({ kind, outcome, server }, (performance.now() - t0) / 1000);
              }
            },
          };
        },
      ])
    );

  return { interceptor, wrapPool, wrapPolicies };
}
