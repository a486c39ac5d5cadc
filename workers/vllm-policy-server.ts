/**
 * VLM policy server process: one vLLM server (started here from a model folder on CPU machines, or the
 * user's own on GPU machines), the dartflow HTTP front env workers call (token, version stamp, load
 * report; rollout/vllm/front.ts), and a Temporal worker on `policy-<serverId>` whose reloadPolicy swaps
 * the served weights (full reload or LoRA in place, rollout/vllm/model-manager.ts). It announces the
 * front's OpenAI base URL (…/v1) in the policy registry, so campaigns find it like any policy server.
 *
 * If vLLM stays unreachable (it died), the process stops: its worker no longer takes reloads, so the
 * next model rollout drops this server instead of rolling every server back, and the registry entry
 * goes away. Start:
 *   tsx workers/vllm-policy-server.ts --server-id v0 --model DIR [--campaign C --initial-version 0]
 *        [--vllm-url http://gpu-host:8000 --served-model-name NAME] [--lora-rank 8] [--port 8800]
 * Env: DARTFLOW_POLICY_SERVER_ID, DARTFLOW_POLICY_HOST, DARTFLOW_POLICY_PORT, DARTFLOW_POLICY_TOKEN(_FILE),
 * DARTFLOW_POLICY_ADVERTISE_URL, DARTFLOW_VLLM_MODEL_DIR, DARTFLOW_VLLM_URL, DARTFLOW_VLLM_API_KEY,
 * DARTFLOW_VLLM_SERVED_NAME, DARTFLOW_VLLM_LORA_RANK.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { announcePolicyServer, keepAnnouncing, readPolicyServerRegistration } from '../activities/data/policy-registry';
import { exitWithParent } from '../infra/parent-watch';
import { installQuietRuntime } from '../infra/runtime';
import { createPolicyMetrics } from '../metrics/policy';
import { vllmServerMetrics } from '../metrics/vllm';
import { startWorkerMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
import { latestCheckpointVersion } from '../rollout/checkpoint';
import { payloadGuardInterceptors } from '../infra/payload-guard';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';
import { connectWorker } from '../infra/temporal-connection';
import { startVllmServer, type VllmServer, type VllmServerOptions } from '../infra/vllm';
import { resolvePolicyToken } from '../rollout/token';
import { createVllmPolicyActivities } from '../rollout/vllm/activities';
import { startVllmFront, type VllmFront } from '../rollout/vllm/front';
import { VllmModelManager } from '../rollout/vllm/model-manager';
import { ServingGate } from '../rollout/vllm/serving-gate';
import { vllmControl, type VllmControl } from '../rollout/vllm/vllm-control';
import { policyQueue } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';

export const DEFAULT_SERVED_NAME = 'dartflow';

export type VllmSource =
  /** Start vLLM here (infra/vllm.ts, the .tools/vlm-venv install) from `initial.modelDir`. */
  | ({ kind: 'start' } & Partial<Omit<VllmServerOptions, 'modelDir' | 'servedModelName' | 'dataDir' | 'devMode'>>)
  /** The user's own vLLM (GPU machines), started from the same folder as `initial.modelDir`. */
  | { kind: 'attach'; url: string; lora?: { maxRank: number }; apiKey?: string };

export interface VllmPolicyServerOptions {
  settings: InfraSettings;
  serverId: string;
  token: string;
  vllm: VllmSource;
  /** The model folder vLLM starts from (or started from), and the version it is. */
  initial: { modelDir: string; version?: number; campaignId?: string };
  servedModelName?: string;
  store?: ObjectStore;
  host?: string;
  port?: number;
  advertiseUrl?: string;
  /** Announce in the registry (default true). */
  announce?: boolean;
  /** Defaults to policyQueue(serverId). */
  taskQueue?: string;
  /** Where checkpoint folders are downloaded (default <dataDir>/vllm-checkpoints/<serverId>). */
  cacheDir?: string;
  /**
   * Before serving, reload the version this server id announced last (the role crashed or was
   * restarted), so it does not come back silently serving its start-up folder. Default true when announcing.
   */
  recoverServed?: boolean;
  /** vLLM unreachable this long → the server stops (default 30 s). */
  vllmLostAfterMs?: number;
  workerOverrides?: Partial<WorkerOptions>;
  /** This process's metrics endpoint (metrics/worker-metrics.ts): served version, lag, vLLM's queue. */
  metrics?: WorkerMetrics;
}

export interface VllmPolicyServerHandle {
  serverId: string;
  taskQueue: string;
  /** The front's OpenAI base URL (…/v1): what env workers and the registry use. */
  url: string;
  front: VllmFront;
  gate: ServingGate;
  manager: VllmModelManager;
  control: VllmControl;
  /** The vLLM process this role started (undefined when attached to the user's). */
  vllm?: VllmServer;
  worker: Worker;
  /** Resolves when the Temporal worker stops. */
  running: Promise<void>;
  /** Resolves with the reason if vLLM became unreachable for good (the handle then shuts itself down). */
  lost: Promise<string>;
  shutdown(): Promise<void>;
}

export async function startVllmPolicyServer(opts: VllmPolicyServerOptions): Promise<VllmPolicyServerHandle> {
  installQuietRuntime();
  const store = opts.store ?? ObjectStore.fromSettings(opts.settings);
  const servedModelName = opts.servedModelName ?? DEFAULT_SERVED_NAME;
  const modelDir = path.resolve(opts.initial.modelDir);
  let vllm: VllmServer | undefined;
  let control: VllmControl;
  if (opts.vllm.kind === 'start') {
    const { kind: _kind, ...rest } = opts.vllm;
    vllm = await startVllmServer({
      ...rest,
      modelDir,
      servedModelName,
      dataDir: opts.settings.dataDir,
      // Dev mode exposes /pause, /resume and /collective_rpc: the full-weight reload needs them.
      devMode: true,
    });
    control = vllmControl({ baseUrl: vllm.baseUrl, servedModelName, ...(rest.lora ? { lora: rest.lora } : {}) });
  } else {
    control = vllmControl({
      baseUrl: opts.vllm.url,
      servedModelName,
      ...(opts.vllm.lora ? { lora: opts.vllm.lora } : {}),
      ...(opts.vllm.apiKey ? { apiKey: opts.vllm.apiKey } : {}),
    });
    if (!(await control.healthy(10_000))) throw new Error(`no vLLM answers /health at ${control.baseUrl}`);
  }

  const gate = new ServingGate({
    campaignId: opts.initial.campaignId ?? null,
    version: opts.initial.version ?? 0,
    kind: 'full',
    model: servedModelName,
    dir: modelDir,
  });
  const log = (msg: string) => console.log(`[vllm-policy-server ${opts.serverId}] ${msg}`);
  const manager = new VllmModelManager({
    serverId: opts.serverId,
    store,
    control,
    gate,
    cacheDir: opts.cacheDir ?? path.join(opts.settings.dataDir, 'vllm-checkpoints', opts.serverId),
    initial: { dir: modelDir, version: opts.initial.version ?? 0, campaignId: opts.initial.campaignId ?? null },
    log,
  });

  if (opts.announce !== false && opts.recoverServed !== false) await recoverServed(opts.serverId, store, manager, log);

  let front: VllmFront | undefined;
  let worker: Worker;
  const taskQueue = opts.taskQueue ?? policyQueue(opts.serverId);
  let url = '';
  const current = () => ({
    serverId: opts.serverId,
    url,
    version: gate.served.version,
    ...(gate.served.campaignId ? { campaignId: gate.served.campaignId } : {}),
  });
  try {
    front = await startVllmFront({
      serverId: opts.serverId,
      token: opts.token,
      gate,
      control,
      host: opts.host ?? '127.0.0.1',
      ...(opts.port !== undefined ? { port: opts.port } : {}),
    });
    url = `${(opts.advertiseUrl ?? front.url).replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`;
    const activities = createVllmPolicyActivities({
      serverId: opts.serverId,
      manager,
      gate,
      url,
      onReloaded: opts.announce === false ? undefined : () => announcePolicyServer(store, current()),
    });
    worker = await Worker.create({
      connection: await connectWorker(opts.settings),
      namespace: opts.settings.temporal.namespace,
      taskQueue,
      activities,
      // Reloads serialize in the manager; the second slot keeps policyHealth answerable during one.
      maxConcurrentActivityTaskExecutions: 2,
      interceptors: payloadGuardInterceptors(),
      shutdownGraceTime: '30 seconds',
      ...opts.workerOverrides,
    });
  } catch (err) {
    await front?.close();
    await vllm?.stop();
    throw err;
  }
  if (opts.metrics) {
    // vLLM's own /metrics, re-exported as dartflow_vllm_* (latencies, tokens, KV cache) and the queue depth.
    const queue = vllmServerMetrics(opts.metrics.registry, opts.serverId, control.baseUrl, control.apiKey);
    const refresh = createPolicyMetrics(opts.metrics.registry, opts.serverId).watch(
      { served: () => gate.served, queueDepth: queue.depth, inFlight: () => gate.inFlight },
      (campaignId) => latestCheckpointVersion(store, campaignId)
    );
    opts.metrics.refreshers.push(refresh, queue.refresh);
  }
  const running = worker.run();
  const stopAnnouncing = opts.announce === false ? async () => undefined : keepAnnouncing(store, current);

  let stopping: Promise<void> | undefined;
  const shutdown = () => {
    stopping ??= (async () => {
      clearInterval(watchdog);
      await stopAnnouncing().catch(() => undefined);
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await front.close();
      await vllm?.stop();
    })();
    return stopping;
  };

  // A dead vLLM must take this server out of the campaign: stop taking reloads and leave the registry.
  let resolveLost: (why: string) => void = () => undefined;
  const lost = new Promise<string>((r) => (resolveLost = r));
  const lostAfter = opts.vllmLostAfterMs ?? 30_000;
  let downSince: number | undefined;
  let probing = false;
  const watchdog = setInterval(
    () => {
      if (probing || stopping) return;
      probing = true;
      void control
        .healthy(3000)
        .then((up) => {
          if (up) downSince = undefined;
          else downSince ??= Date.now();
          if (downSince !== undefined && Date.now() - downSince >= lostAfter && !stopping) {
            const why = `vLLM at ${control.baseUrl} unreachable for ${Math.round((Date.now() - downSince) / 1000)} s`;
            log(`${why}; stopping`);
            resolveLost(why);
            void shutdown();
          }
        })
        .finally(() => (probing = false));
    },
    Math.min(5000, Math.max(500, lostAfter / 4))
  );
  watchdog.unref();

  return {
    serverId: opts.serverId,
    taskQueue,
    url,
    front,
    gate,
    manager,
    control,
    ...(vllm ? { vllm } : {}),
    worker,
    running,
    lost,
    shutdown,
  };
}

/** Reloads what this server id served before a restart; a refused or unreadable one leaves the start-up folder serving. */
async function recoverServed(
  serverId: string,
  store: ObjectStore,
  manager: VllmModelManager,
  log: (msg: string) => void
): Promise<void> {
  let prev;
  try {
    prev = await readPolicyServerRegistration(store, serverId);
  } catch (err) {
    log(`could not read its previous registration (${String(err)}); serving the start-up folder`);
    return;
  }
  if (!prev?.campaignId || prev.version === undefined) return;
  try {
    const r = await manager.reload(prev.campaignId, prev.version);
    if (!r.unchanged) log(`recovered ${prev.campaignId} v${prev.version} from its registration in ${r.loadMs} ms`);
  } catch (err) {
    log(`could not recover ${prev.campaignId} v${prev.version}: ${String(err)}; serving the start-up folder`);
  }
}

const int = (v: string | undefined, name: string): number | undefined => {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${v}"`);
  return n;
};

async function main(): Promise<void> {
  const env = process.env;
  const { values } = parseArgs({
    options: {
      'server-id': { type: 'string' },
      model: { type: 'string' },
      'vllm-url': { type: 'string' },
      'served-model-name': { type: 'string' },
      'lora-rank': { type: 'string' },
      campaign: { type: 'string' },
      'initial-version': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'advertise-url': { type: 'string' },
      'max-model-len': { type: 'string' },
      'max-num-seqs': { type: 'string' },
      'kv-cache-gib': { type: 'string' },
    },
  });
  const settings = loadInfraSettings();
  const serverId = values['server-id'] ?? env.DARTFLOW_POLICY_SERVER_ID ?? 'v0';
  const modelDir = values.model ?? env.DARTFLOW_VLLM_MODEL_DIR;
  if (!modelDir) throw new Error('--model DIR (or DARTFLOW_VLLM_MODEL_DIR) is required: the folder vLLM serves first');
  const token = resolvePolicyToken({ defaultFile: path.join(settings.dataDir, 'policy-token'), create: true });
  const loraRank = int(values['lora-rank'] ?? env.DARTFLOW_VLLM_LORA_RANK, 'lora-rank');
  const lora = loraRank ? { maxRank: loraRank } : undefined;
  const attachUrl = values['vllm-url'] ?? env.DARTFLOW_VLLM_URL;
  const port = int(values.port ?? env.DARTFLOW_POLICY_PORT, 'port');
  const maxModelLen = int(values['max-model-len'], 'max-model-len');
  const maxNumSeqs = int(values['max-num-seqs'], 'max-num-seqs');
  const kvCacheGiB = int(values['kv-cache-gib'], 'kv-cache-gib');
  const initialVersion = int(values['initial-version'], 'initial-version');
  const advertiseUrl = values['advertise-url'] ?? env.DARTFLOW_POLICY_ADVERTISE_URL;
  const servedModelName = values['served-model-name'] ?? env.DARTFLOW_VLLM_SERVED_NAME;
  // Before the Temporal connection: it installs the Runtime with its metrics exporter (docs/metrics.md).
  const metrics = await startWorkerMetrics('vllm-policy');
  const handle = await startVllmPolicyServer({
    ...(metrics ? { metrics } : {}),
    settings,
    serverId,
    token,
    vllm: attachUrl
      ? {
          kind: 'attach',
          url: attachUrl,
          ...(lora ? { lora } : {}),
          ...(env.DARTFLOW_VLLM_API_KEY ? { apiKey: env.DARTFLOW_VLLM_API_KEY } : {}),
        }
      : {
          kind: 'start',
          ...(lora ? { lora } : {}),
          ...(maxModelLen !== undefined ? { maxModelLen } : {}),
          ...(maxNumSeqs !== undefined ? { maxNumSeqs } : {}),
          ...(kvCacheGiB !== undefined ? { kvCacheGiB } : {}),
        },
    initial: {
      modelDir,
      ...(initialVersion !== undefined ? { version: initialVersion } : {}),
      ...(values.campaign ? { campaignId: values.campaign } : {}),
    },
    host: values.host ?? env.DARTFLOW_POLICY_HOST ?? '127.0.0.1',
    ...(port !== undefined ? { port } : {}),
    ...(advertiseUrl ? { advertiseUrl } : {}),
    ...(servedModelName ? { servedModelName } : {}),
  });
  console.log(
    `[vllm-policy-server ${serverId}] front ${handle.url} → vLLM ${handle.control.baseUrl}` +
      `${handle.vllm ? ` (pid ${handle.vllm.pid}, log ${handle.vllm.logFile})` : ' (attached)'}, ` +
      `task queue "${handle.taskQueue}", serving v${handle.gate.served.version}`
  );
  let exitCode = 0;
  void handle.lost.then(() => (exitCode = 1));
  const stop = () => void handle.shutdown();
  exitWithParent(stop);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await handle.running;
  await handle.shutdown();
  process.exit(exitCode);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
