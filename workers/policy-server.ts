/**
 * Policy server process: one PolicyEngine (onnxruntime-node session of the served checkpoint), its HTTP
 * API for env workers, and a Temporal worker on its private queue `policy-<serverId>` for
 * reloadPolicy/policyHealth, so versions roll out one server at a time (DESIGN.md, dart-spec.md §1.5).
 *
 * It runs no workflows: ORT blocks the event loop while it computes (temporal-practice.md §1.4), so the
 * process only takes short activities, one at a time. Start:
 *   tsx workers/policy-server.ts --server-id p0 --port 8700 [--campaign C --version latest|N]
 * Env: DARTFLOW_POLICY_SERVER_ID, DARTFLOW_POLICY_HOST, DARTFLOW_POLICY_PORT, DARTFLOW_POLICY_TOKEN(_FILE),
 * DARTFLOW_POLICY_MAX_BATCH, DARTFLOW_POLICY_MAX_WAIT_MS, DARTFLOW_POLICY_THREADS, DARTFLOW_POLICY_PREPROCESS_THREADS,
 * DARTFLOW_POLICY_SPEC_FILE, DARTFLOW_POLICY_ADVERTISE_URL.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { announcePolicyServer, keepAnnouncing, readPolicyServerRegistration } from '../activities/data/policy-registry';
import { createPolicyActivities } from '../activities/policy';
import { installQuietRuntime } from '../infra/runtime';
import { createPolicyMetrics } from '../metrics/policy';
import { startWorkerMetrics, withMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
import { exitWithParent } from '../infra/parent-watch';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { connectWorker } from '../infra/temporal-connection';
import { defaultPolicySpec, type PolicySpec } from '../policy/spec';
import { readPolicySpecFile } from '../policy/spec-file';
import { latestCheckpointVersion } from '../rollout/checkpoint';
import type { BatchEvent } from '../rollout/batcher';
import { PolicyEngine } from '../rollout/engine';
import { startPolicyHttpServer, type RunningPolicyServer } from '../rollout/policy-server';
import { resolvePolicyToken } from '../rollout/token';
import { policyQueue } from '../schemas/task-queues';
import { StorageUnavailableError } from '../storage/errors';
import { ObjectStore } from '../storage/object-store';

export interface PolicyServerOptions {
  settings: InfraSettings;
  serverId: string;
  token: string;
  spec?: PolicySpec;
  store?: ObjectStore;
  host?: string;
  port?: number;
  maxBatch?: number;
  maxWaitMs?: number;
  threads?: number;
  /** Worker threads for screenshot decoding (0 = main thread); worth it on hosts with spare cores. */
  preprocessThreads?: number;
  /** Load this checkpoint before serving ('latest' = highest version in the store; skipped if none). */
  initial?: { campaignId: string; version: number | 'latest' };
  /**
   * Without `initial`: reload the campaign and version this server id announced last (it crashed or was
   * restarted), so it answers at once instead of failing every act until the next model rollout.
   * Retried in the background while MinIO is unreachable. Default true when announcing.
   */
  recoverServed?: boolean;
  /**
   * Announce URL and served version in the store's registry every few seconds (campaigns discover
   * servers there; activities/data/policy-registry.ts). Default true.
   */
  announce?: boolean;
  /** URL others should use (behind NAT/proxy or when bound to 0.0.0.0); default the bound URL. */
  advertiseUrl?: string;
  /** Defaults to policyQueue(serverId); tests pass a unique queue. */
  taskQueue?: string;
  workerOverrides?: Partial<WorkerOptions>;
  /** This process's metrics endpoint (metrics/worker-metrics.ts): latency, batches, queue, version lag. */
  metrics?: WorkerMetrics;
}

export interface PolicyServerHandle {
  serverId: string;
  taskQueue: string;
  url: string;
  engine: PolicyEngine;
  http: RunningPolicyServer;
  worker: Worker;
  /** Resolves when the Temporal worker stops. */
  running: Promise<void>;
  /** Graceful stop: stop polling, finish the current activity, close HTTP, release the session. */
  shutdown(): Promise<void>;
}

export async function startPolicyServer(opts: PolicyServerOptions): Promise<PolicyServerHandle> {
  installQuietRuntime();
  const store = opts.store ?? ObjectStore.fromSettings(opts.settings);
  const policyMetrics = opts.metrics && createPolicyMetrics(opts.metrics.registry, opts.serverId);
  const engine = new PolicyEngine({
    ...(policyMetrics ? { onBatch: (e: BatchEvent) => policyMetrics.onBatch(e) } : {}),
    serverId: opts.serverId,
    spec: opts.spec ?? defaultPolicySpec,
    // A spec given (--spec-file) pins the server to that network; otherwise it serves whatever network each
    // checkpoint names (rollout/checkpoint.ts readCheckpoint).
    pinSpec: opts.spec !== undefined,
    store,
    ...(opts.maxBatch !== undefined ? { maxBatch: opts.maxBatch } : {}),
    ...(opts.maxWaitMs !== undefined ? { maxWaitMs: opts.maxWaitMs } : {}),
    ...(opts.threads !== undefined ? { threads: opts.threads } : {}),
    ...(opts.preprocessThreads !== undefined ? { preprocessThreads: opts.preprocessThreads } : {}),
  });
  if (opts.initial) {
    const v =
      opts.initial.version === 'latest'
        ? await latestCheckpointVersion(store, opts.initial.campaignId)
        : opts.initial.version;
    if (v !== undefined) await engine.reload(opts.initial.campaignId, v);
  }
  const http = await startPolicyHttpServer({
    engine,
    token: opts.token,
    store,
    host: opts.host ?? '127.0.0.1',
    ...(opts.port !== undefined ? { port: opts.port } : {}),
  });
  if (policyMetrics) {
    policyMetrics.observeHttp(http.server);
    const refresh = policyMetrics.watch(
      {
        served: () => engine.served,
        queueDepth: () => engine.health().queueDepth,
        inFlight: () => engine.health().inFlight,
      },
      (campaignId) => latestCheckpointVersion(store, campaignId)
    );
    opts.metrics!.refreshers.push(refresh);
  }
  const taskQueue = opts.taskQueue ?? policyQueue(opts.serverId);
  let worker: Worker;
  // Set once announcing starts: a reload is announced before reloadPolicy returns, so the registration
  // always names the served version (what a restarted server recovers).
  let announceNow: (() => Promise<void>) | undefined;
  const activities = createPolicyActivities({ engine, url: opts.advertiseUrl ?? http.url });
  const reloadPolicy = activities.reloadPolicy;
  activities.reloadPolicy = async (input) => {
    const result = await reloadPolicy(input);
    await announceNow?.().catch(() => undefined);
    return result;
  };
  try {
    const connection = await connectWorker(opts.settings);
    worker = await Worker.create({
      connection,
      namespace: opts.settings.temporal.namespace,
      taskQueue,
      activities,
      // Reloads serialize inside the engine; the second slot keeps policyHealth answerable during one.
      maxConcurrentActivityTaskExecutions: 2,
      interceptors: withMetrics(payloadGuardInterceptors(), opts.metrics),
      shutdownGraceTime: '30 seconds',
      ...opts.workerOverrides,
    });
  } catch (err) {
    await http.close();
    await engine.close();
    throw err;
  }
  const running = worker.run();
  const url = opts.advertiseUrl ?? http.url;
  let stopped = false;
  // While a crashed predecessor's model is being reloaded, keep announcing it (so a second crash in the
  // meantime does not lose what to recover).
  let recovering: { campaignId: string; version: number } | undefined;
  const current = () => {
    const served = engine.served ?? recovering;
    return {
      serverId: opts.serverId,
      url,
      ...(served ? { version: served.version, campaignId: served.campaignId } : {}),
    };
  };
  const announce = () => {
    announceNow = () => announcePolicyServer(store, current());
    return keepAnnouncing(store, current);
  };
  let stopAnnouncing: () => Promise<void> = async () => undefined;
  if (opts.announce !== false) {
    if (!opts.initial && opts.recoverServed !== false) {
      // Read the previous registration before the first announcement overwrites it, then announce at once
      // and reload in the background.
      void (async () => {
        recovering = await readPreviousRegistration(opts.serverId, store, () => stopped);
        if (stopped) return;
        stopAnnouncing = announce();
        if (recovering) await recoverServedModel(opts.serverId, engine, recovering);
        recovering = undefined;
      })();
    } else stopAnnouncing = announce();
  }
  let stopping: Promise<void> | undefined;
  return {
    serverId: opts.serverId,
    taskQueue,
    url,
    engine,
    http,
    worker,
    running,
    shutdown() {
      stopping ??= (async () => {
        stopped = true;
        await stopAnnouncing().catch(() => undefined);
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running.catch(() => undefined);
        await http.close();
        await engine.close();
      })();
      return stopping;
    },
  };
}

/** What this server id announced last (campaign and version it served), retried while MinIO is unreachable. */
async function readPreviousRegistration(
  serverId: string,
  store: ObjectStore,
  isStopped: () => boolean
): Promise<{ campaignId: string; version: number } | undefined> {
  for (let attempt = 0; !isStopped(); attempt++) {
    try {
      const reg = await readPolicyServerRegistration(store, serverId);
      return reg?.campaignId && reg.version !== undefined
        ? { campaignId: reg.campaignId, version: reg.version }
        : undefined;
    } catch (err) {
      if (!(err instanceof StorageUnavailableError) || attempt >= 60) {
        console.warn(`[policy-server ${serverId}] could not read its previous registration: ${String(err)}`);
        return undefined;
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  return undefined;
}

/** Reloads the predecessor's model, unless a reloadPolicy got there first (never swap an older version over it). */
async function recoverServedModel(
  serverId: string,
  engine: PolicyEngine,
  target: { campaignId: string; version: number }
): Promise<void> {
  for (let attempt = 0; attempt < 60; attempt++) {
    if (engine.served || engine.health().loading) return;
    try {
      await engine.reload(target.campaignId, target.version);
      console.log(
        `[policy-server ${serverId}] recovered ${target.campaignId} v${target.version} from its registration`
      );
      return;
    } catch (err) {
      if (!(err instanceof StorageUnavailableError)) {
        console.warn(`[policy-server ${serverId}] could not recover the served model: ${String(err)}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

/** The spec file's network (the server is then pinned to it), or none: serve what each checkpoint names. */
function readSpec(file: string | undefined): PolicySpec | undefined {
  return file ? readPolicySpecFile(file) : undefined;
}

const withSpec = (spec: PolicySpec | undefined) => (spec ? { spec } : {});

const num = (v: string | undefined, name: string): number | undefined => {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${name} must be a number, got "${v}"`);
  return n;
};

async function main(): Promise<void> {
  const env = process.env;
  const { values } = parseArgs({
    options: {
      'server-id': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'max-batch': { type: 'string' },
      'max-wait-ms': { type: 'string' },
      threads: { type: 'string' },
      'preprocess-threads': { type: 'string' },
      campaign: { type: 'string' },
      version: { type: 'string' },
      'spec-file': { type: 'string' },
      'advertise-url': { type: 'string' },
    },
  });
  const settings = loadInfraSettings();
  const serverId = values['server-id'] ?? env.DARTFLOW_POLICY_SERVER_ID ?? 'p0';
  const token = resolvePolicyToken({ defaultFile: path.join(settings.dataDir, 'policy-token'), create: true });
  const versionArg = values.version ?? 'latest';
  const port = num(values.port ?? env.DARTFLOW_POLICY_PORT, 'port');
  const maxBatch = num(values['max-batch'] ?? env.DARTFLOW_POLICY_MAX_BATCH, 'max-batch');
  const maxWaitMs = num(values['max-wait-ms'] ?? env.DARTFLOW_POLICY_MAX_WAIT_MS, 'max-wait-ms');
  const threads = num(values.threads ?? env.DARTFLOW_POLICY_THREADS, 'threads');
  const preprocessThreads = num(
    values['preprocess-threads'] ?? env.DARTFLOW_POLICY_PREPROCESS_THREADS,
    'preprocess-threads'
  );
  // Before the Temporal connection: it installs the Runtime with its metrics exporter (docs/metrics.md).
  const metrics = await startWorkerMetrics('policy');
  const handle = await startPolicyServer({
    ...(metrics ? { metrics } : {}),
    settings,
    serverId,
    token,
    ...withSpec(readSpec(values['spec-file'] || env.DARTFLOW_POLICY_SPEC_FILE || undefined)),
    host: values.host ?? env.DARTFLOW_POLICY_HOST ?? '127.0.0.1',
    ...((values['advertise-url'] ?? env.DARTFLOW_POLICY_ADVERTISE_URL)
      ? { advertiseUrl: values['advertise-url'] ?? env.DARTFLOW_POLICY_ADVERTISE_URL }
      : {}),
    ...(port !== undefined ? { port } : {}),
    ...(maxBatch !== undefined ? { maxBatch } : {}),
    ...(maxWaitMs !== undefined ? { maxWaitMs } : {}),
    ...(threads !== undefined ? { threads } : {}),
    ...(preprocessThreads !== undefined ? { preprocessThreads } : {}),
    ...(values.campaign
      ? { initial: { campaignId: values.campaign, version: versionArg === 'latest' ? 'latest' : Number(versionArg) } }
      : {}),
  });
  const served = handle.engine.served;
  console.log(
    `[policy-server ${serverId}] listening on ${handle.url}, task queue "${handle.taskQueue}", ` +
      (served ? `serving ${served.campaignId} v${served.version}` : 'no model yet (waiting for reloadPolicy)')
  );
  const stop = () => void handle.shutdown();
  exitWithParent(stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await handle.running;
  await handle.shutdown();
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
