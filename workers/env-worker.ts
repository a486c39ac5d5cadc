/**
 * The env worker: a Temporal worker on task queue `env` with a fixed number of env slots, running
 * runEpisode activities. Activity concurrency is the slot count (plus a few episodes waiting for an env
 * on browser pools, whose episodes last seconds: activitySlotsFor), so an accepted task gets an env
 * promptly and excess work stays in Temporal's queue where other env workers can take it.
 *
 *   npx tsx workers/env-worker.ts      (DARTFLOW_ENV_KIND=browser|simulated|remote, DARTFLOW_ENV_SLOTS=4)
 */
import { Worker } from '@temporalio/worker';
import { builtinPolicies } from '../activities/env/policies';
import { createEnvActivities } from '../activities/env/run-episode';
import type { PolicyFactory } from '../activities/env/policy';
import { createEnvPool, envPoolConfigFromEnv, type EnvPoolConfig } from '../envs/pool-factory';
import type { EnvPool } from '../envs/types';
import { exitWithParent } from '../infra/parent-watch';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { connectWorker, retryStartup } from '../infra/temporal-connection';
import { installQuietRuntime } from '../infra/runtime';
import { createEnvMetrics } from '../metrics/env';
import { startWorkerMetrics, withMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
import { rolloutPolicyFactories } from '../rollout/factories';
import { TASK_QUEUES } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';

export const ENV_TASK_QUEUE = TASK_QUEUES.env;

/**
 * Episodes the worker runs at once: one per env slot, plus on a browser pool a few that wait for an env.
 * An episode hands its env back before its records go up (steps, manifest, index entry: a few hundred ms,
 * up to 2 s of index linger) and Temporal needs a round trip to bring the next episode; with exactly one
 * activity per slot the env sat idle meanwhile (19 % of env-slot time in the VLM bench, browser episodes of
 * ≈ 4 s). A quarter of the slots more (at most 16) covers that tail. Pools of minutes-long episodes
 * (OSWorld, remote, simulated) take none: a waiting episode would spend its 15-minute start-to-close
 * waiting for an env here while another worker might have one free, and their write tail is a sliver of
 * an episode.
 */
export function activitySlotsFor(pool: Pick<EnvPool, 'kind' | 'slots'>): number {
  return pool.slots + (pool.kind === 'browser' ? Math.min(16, Math.ceil(pool.slots / 4)) : 0);
}

export interface EnvWorkerOptions {
  settings?: InfraSettings;
  taskQueue?: string;
  pool?: EnvPool;
  poolConfig?: EnvPoolConfig;
  store?: ObjectStore;
  /** Extra policy kinds (e.g. the ONNX / UI-TARS policy clients) next to oracle and random. */
  policies?: Record<string, PolicyFactory>;
  /** This process's metrics endpoint (metrics/worker-metrics.ts): episodes, slots, policy latency. */
  metrics?: WorkerMetrics;
}

export interface EnvWorkerHandle {
  worker: Worker;
  pool: EnvPool;
  store: ObjectStore;
  /** Runs until shutdown; then closes the pool (and its browser). */
  run(): Promise<void>;
  shutdown(): void;
}

export async function createEnvWorker(opts: EnvWorkerOptions = {}): Promise<EnvWorkerHandle> {
  installQuietRuntime();
  const settings = opts.settings ?? loadInfraSettings();
  const store = opts.store ?? ObjectStore.fromSettings(settings);
  await retryStartup(`reaching object storage at ${store.endpoint}`, () => store.ensureBucket());
  const basePool = opts.pool ?? createEnvPool(opts.poolConfig ?? envPoolConfigFromEnv());
  const envMetrics = opts.metrics && createEnvMetrics(opts.metrics.registry);
  if (envMetrics) opts.metrics!.activityInterceptors.push(envMetrics.interceptor);
  const pool = envMetrics ? envMetrics.wrapPool(basePool) : basePool;
  const policies = { ...builtinPolicies(), ...rolloutPolicyFactories({ dataDir: settings.dataDir }), ...opts.policies };
  const connection = await connectWorker(settings);
  const worker = await Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    taskQueue: opts.taskQueue ?? ENV_TASK_QUEUE,
    // The embedded (policy server) and UI-TARS (vLLM) clients are always available next to oracle/random.
    activities: createEnvActivities({
      pool,
      store,
      policies: envMetrics ? envMetrics.wrapPolicies(policies) : policies,
    }),
    maxConcurrentActivityTaskExecutions: activitySlotsFor(pool),
    // The SDK's default is at most 10 open polls: with hundreds of slots a poll round trip on a busy machine
    // capped how fast freed slots got their next episode (slots sat idle beside a backlog; docs/benchmarks.md,
    // "Scale"). Autoscaling polls follow the server's backlog hints, up to one poll per free slot.
    activityTaskPollerBehavior: {
      type: 'autoscaling',
      minimum: 1,
      initial: Math.min(10, pool.slots),
      maximum: Math.max(1, Math.min(100, pool.slots)),
    },
    interceptors: withMetrics(payloadGuardInterceptors(), opts.metrics),
    // An episode in flight finishes on SIGTERM (a kill -9 is covered by retries on a fresh env).
    shutdownGraceTime: '1 minute',
  });
  return {
    worker,
    pool,
    store,
    async run() {
      try {
        await worker.run();
      } finally {
        await pool.close();
        await connection.close();
      }
    },
    // A second stop request (SIGINT then SIGTERM, or the parent watch) must not throw "shutdown called twice".
    shutdown: () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
    },
  };
}

async function main(): Promise<void> {
  // First: it installs the Temporal Runtime with its metrics exporter (docs/metrics.md).
  const metrics = await startWorkerMetrics('env');
  const handle = await createEnvWorker(metrics ? { metrics } : {});
  // The parent died while this role was starting: close the env pool instead of polling for nobody.
  if (exitWithParent(() => handle.shutdown())) {
    await handle.pool.close();
    process.exit(0);
  }
  const s = handle.pool.stats();
  console.log(`[env-worker] ${s.slots} ${s.kind} env slots on task queue "${ENV_TASK_QUEUE}"`);
  process.once('SIGINT', () => handle.shutdown());
  process.once('SIGTERM', () => handle.shutdown());
  await handle.run();
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(`[env-worker] ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  });
}
