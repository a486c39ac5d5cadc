/**
 * Start, reuse and stop the local Temporal dev server and MinIO server.
 *
 * - Start is idempotent: a server that is already healthy on its port is reused.
 * - Stop kills only the process whose PID this module recorded (checked against /proc cmdline),
 *   never by process name.
 * - With TEMPORAL_ADDRESS / S3_ENDPOINT set, nothing is started; the external service is checked.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTE_CLI_TYPES } from '../schemas/search-attributes';
import type { InfraSettings } from './settings';
import { connectClient } from './temporal-connection';

export interface ServiceHandle {
  name: 'temporal' | 'minio';
  pid?: number;
  reused: boolean;
  external: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function runDir(settings: InfraSettings): string {
  const dir = path.join(settings.dataDir, 'run');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}
function logDir(settings: InfraSettings): string {
  const dir = path.join(settings.dataDir, 'logs');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}
function pidFile(settings: InfraSettings, name: string): string {
  return path.join(runDir(settings), `${name}.pid`);
}

/** The PID recorded for `name`, if that process is alive and is still the binary we started. */
export function recordedPid(settings: InfraSettings, name: string, expectInCmdline: string): number | undefined {
  const file = pidFile(settings, name);
  if (!fs.existsSync(file)) return undefined;
  const pid = Number(fs.readFileSync(file, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.includes(expectInCmdline)) return undefined; // PID reused by another program
    return pid;
  } catch {
    return undefined;
  }
}

export async function temporalHealthy(address: string, timeoutMs = 2000): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    // No retry interceptor: a probe wants one answer, and the default interceptor's retry timer can fire
    // after close() (while the server is down or starting), throwing "Channel has been shut down" uncaught.
    connection = await Connection.connect({ address, connectTimeout: timeoutMs, interceptors: [] });
    await connection.workflowService.getSystemInfo({});
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

export async function minioHealthy(endpoint: string, timeoutMs = 2000): Promise<boolean> {
  try {
    const res = await fetch(new URL('/minio/health/live', endpoint), { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok;
  } catch {
    return false;
  }
}

async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  logFile?: string
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(250);
  }
  const tail =
    logFile && fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n') : '';
  throw new Error(
    `${what} did not become healthy within ${timeoutMs / 1000}s.${tail ? `\nLast log lines (${logFile}):\n${tail}` : ''}`
  );
}

function spawnDaemon(
  settings: InfraSettings,
  name: string,
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv
): { pid: number; logFile: string } {
  const logFile = path.join(logDir(settings), `${name}.log`);
  const out = fs.openSync(logFile, 'a');
  // detached: own process group, survives the parent; stdio to a file so no pipe keeps callers waiting.
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', out, out], env });
  fs.closeSync(out);
  if (child.pid === undefined) throw new Error(`failed to spawn ${cmd}`);
  child.unref();
  fs.writeFileSync(pidFile(settings, name), String(child.pid));
  return { pid: child.pid, logFile };
}

export interface TemporalDevServerOptions {
  port: number;
  uiPort: number;
  dbFile: string;
  namespace: string;
  /** Name for PID/log files; lets tests run an extra private dev server next to the shared one. */
  instanceName?: string;
  extraArgs?: string[];
}

/** SQLite settings of the dev server's history database (see startTemporalDevServer). */
export const SQLITE_PRAGMAS = ['journal_mode=wal', 'synchronous=normal'] as const;
/**
 * Dynamic config of the dev server. `history.eventsCacheMaxSizeBytes`: when an env worker takes an episode,
 * the server needs the episode's ActivityTaskScheduled event (its input); with the default 512 KiB events
 * cache (the dev server has one history shard) that event was gone by then for most episodes, which wait
 * in the task queue behind thousands of others, and every episode start read history from SQLite (13,187
 * misses of 18,774 lookups at 2,048 envs; docs/benchmarks.md, "Scale"). 64 MiB holds the scheduled events
 * of ≈ 40,000 queued episodes.
 */
export const DEV_SERVER_DYNAMIC_CONFIG = ['history.eventsCacheMaxSizeBytes=67108864'] as const;

/** Starts (or reuses) a Temporal dev server with persistent SQLite history and the Web UI. */
export async function startTemporalDevServer(
  settings: InfraSettings,
  opts: TemporalDevServerOptions
): Promise<ServiceHandle> {
  const name = opts.instanceName ?? 'temporal';
  const address = `127.0.0.1:${opts.port}`;
  const cli = settings.temporal.cliPath;
  if (!cli)
    throw new Error('No Temporal CLI: run `npm run infra:install` (or set TEMPORAL_CLI_PATH / TEMPORAL_ADDRESS).');
  const existing = recordedPid(settings, name, 'start-dev');
  if (await temporalHealthy(address)) return { name: 'temporal', pid: existing, reused: true, external: false };
  if (existing) await stopPid(existing); // recorded but unhealthy: restart it cleanly
  fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--ui-port',
    String(opts.uiPort),
    '--db-filename',
    opts.dbFile,
    // SQLite's defaults (rollback journal, synchronous=FULL) fsync every commit twice: at hundreds of episodes
    // per second that disk wait, not CPU, capped the dev server (docs/benchmarks.md, "Scale"). WAL with
    // synchronous=NORMAL keeps every commit across a crash or kill -9 of the server; only an OS crash or power
    // loss can lose the last commits (the database stays consistent). sqlite.org/wal.html
    ...SQLITE_PRAGMAS.flatMap((p) => ['--sqlite-pragma', p]),
    ...DEV_SERVER_DYNAMIC_CONFIG.flatMap((kv) => ['--dynamic-config-value', kv]),
    '--namespace',
    opts.namespace,
    '--log-level',
    'warn',
    '--ui-disable-news-fetch',
    ...Object.entries(SEARCH_ATTRIBUTE_CLI_TYPES).flatMap(([k, t]) => ['--search-attribute', `${k}=${t}`]),
    ...(opts.extraArgs ?? []),
  ];
  // The dev server picks free ports for its internal services itself; another process can take one
  // between its pick and its bind ("address already in use", the process exits). Such a start is retried.
  for (let attempt = 1; ; attempt++) {
    const logBefore = fileSize(path.join(logDir(settings), `${name}.log`));
    const { pid, logFile } = spawnDaemon(settings, name, cli, args, process.env);
    try {
      await waitUntil(
        `Temporal dev server on ${address}`,
        async () => {
          if (await temporalHealthy(address)) return true;
          if (!processAlive(pid)) throw new Error(`Temporal dev server (pid ${pid}) exited during start-up`);
          return false;
        },
        60_000
      );
      return { name: 'temporal', pid, reused: false, external: false };
    } catch (err) {
      const newLog = readFrom(logFile, logBefore);
      if (attempt < 3 && !processAlive(pid) && /address already in use/.test(newLog)) continue;
      const tail = newLog.split('\n').slice(-15).join('\n');
      throw new Error(`${err instanceof Error ? err.message : String(err)}\nLast log lines (${logFile}):\n${tail}`);
    }
  }
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

function readFrom(file: string, offset: number): string {
  try {
    return fs.readFileSync(file).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}

/** Alive and not a zombie (a detached child that exited may linger as one until reaped). */
function processAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** Makes sure dartflow's search attributes exist in the namespace (idempotent; also for external clusters). */
export async function registerSearchAttributes(settings: InfraSettings): Promise<void> {
  const client = await connectClient(settings);
  try {
    const { namespace } = settings.temporal;
    const existing = await client.connection.operatorService.listSearchAttributes({ namespace });
    const have = new Set(Object.keys(existing.customAttributes ?? {}));
    const IVT = temporal.api.enums.v1.IndexedValueType;
    const typeMap: Record<string, temporal.api.enums.v1.IndexedValueType> = {
      Keyword: IVT.INDEXED_VALUE_TYPE_KEYWORD,
      Int: IVT.INDEXED_VALUE_TYPE_INT,
      Double: IVT.INDEXED_VALUE_TYPE_DOUBLE,
    };
    const missing = Object.fromEntries(
      Object.entries(SEARCH_ATTRIBUTE_CLI_TYPES)
        .filter(([k]) => !have.has(k))
        .map(([k, t]) => [k, typeMap[t] ?? IVT.INDEXED_VALUE_TYPE_KEYWORD])
    );
    if (Object.keys(missing).length > 0) {
      await client.connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
    }
  } finally {
    await client.connection.close();
  }
}

/**
 * Registers `namespace` (1-day retention) with dartflow's search attributes and returns settings that use
 * it: tests and benchmarks run each campaign in a namespace of its own. A new namespace takes a moment to
 * exist, so registering its search attributes is retried for up to 30 s.
 */
export async function registerScratchNamespace(base: InfraSettings, namespace: string): Promise<InfraSettings> {
  const admin = await connectClient(base);
  try {
    await admin.connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
  } finally {
    await admin.connection.close();
  }
  const settings: InfraSettings = { ...base, temporal: { ...base.temporal, namespace } };
  for (let attempt = 1; ; attempt++) {
    try {
      await registerSearchAttributes(settings);
      return settings;
    } catch (err) {
      if (attempt >= 60) throw err;
      await sleep(500);
    }
  }
}

export async function startTemporal(settings: InfraSettings): Promise<ServiceHandle> {
  if (settings.temporal.external) {
    if (!(await temporalHealthy(settings.temporal.address, 5000)) && !settings.temporal.tls) {
      throw new Error(
        `TEMPORAL_ADDRESS=${settings.temporal.address} is not reachable. Check the address or unset it to run a local dev server.`
      );
    }
    await registerSearchAttributes(settings).catch((err: unknown) => {
      console.warn(`[infra] could not register search attributes on the external cluster: ${String(err)}`);
    });
    return { name: 'temporal', reused: true, external: true };
  }
  const handle = await startTemporalDevServer(settings, {
    port: settings.temporal.port,
    uiPort: settings.temporal.uiPort,
    dbFile: path.join(settings.dataDir, 'temporal', 'dartflow.sqlite'),
    namespace: settings.temporal.namespace,
  });
  await registerSearchAttributes(settings);
  return handle;
}

export async function startMinio(settings: InfraSettings): Promise<ServiceHandle> {
  const { s3 } = settings;
  if (s3.external) {
    if (!(await minioHealthy(s3.endpoint, 5000))) {
      // Not every S3 implements MinIO's health endpoint; the storage layer will report a real failure.
      console.warn(`[infra] S3_ENDPOINT=${s3.endpoint} did not answer /minio/health/live; continuing.`);
    }
    return { name: 'minio', reused: true, external: true };
  }
  const existing = recordedPid(settings, 'minio', 'minio');
  if (await minioHealthy(s3.endpoint)) return { name: 'minio', pid: existing, reused: true, external: false };
  if (existing) await stopPid(existing);
  if (!s3.minioBin) throw new Error('No MinIO server: run `npm run infra:install` (or set MINIO_BIN / S3_ENDPOINT).');
  const dataDir = path.join(settings.dataDir, 'minio');
  fs.mkdirSync(dataDir, { recursive: true });
  const args = [
    'server',
    dataDir,
    '--address',
    `127.0.0.1:${s3.port}`,
    '--console-address',
    `127.0.0.1:${s3.consolePort}`,
    '--quiet',
  ];
  const env = {
    ...process.env,
    MINIO_ROOT_USER: s3.accessKey,
    MINIO_ROOT_PASSWORD: s3.secretKey,
    MINIO_UPDATE: 'off',
    MINIO_CALLHOME_ENABLE: 'off',
  };
  const { pid, logFile } = spawnDaemon(settings, 'minio', s3.minioBin, args, env);
  await waitUntil(`MinIO on ${s3.endpoint}`, () => minioHealthy(s3.endpoint), 60_000, logFile);
  return { name: 'minio', pid, reused: false, external: false };
}

export async function stopPid(pid: number, graceMs = 10_000): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(-pid, 'SIGTERM'); // the daemon's own process group
  } catch {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
  }
  const deadline = Date.now() + graceMs;
  while (alive() && Date.now() < deadline) await sleep(100);
  if (alive()) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

/** Stops a service started by this module, by its recorded PID. Returns false if none was recorded. */
export async function stopService(settings: InfraSettings, name: string, cmdlineMarker: string): Promise<boolean> {
  const pid = recordedPid(settings, name, cmdlineMarker);
  const file = pidFile(settings, name);
  if (pid) await stopPid(pid);
  if (fs.existsSync(file)) fs.rmSync(file);
  return pid !== undefined;
}

export async function infraUp(settings: InfraSettings): Promise<ServiceHandle[]> {
  // MinIO first: it is quick, and Temporal's start waits on its own health check.
  const minio = await startMinio(settings);
  const temporal = await startTemporal(settings);
  return [temporal, minio];
}

export async function infraDown(settings: InfraSettings): Promise<string[]> {
  const stopped: string[] = [];
  if (!settings.temporal.external && (await stopService(settings, 'temporal', 'start-dev'))) stopped.push('temporal');
  if (!settings.s3.external && (await stopService(settings, 'minio', 'minio'))) stopped.push('minio');
  return stopped;
}

export function describeEndpoints(settings: InfraSettings): string[] {
  return [
    `Temporal   ${settings.temporal.address} (namespace ${settings.temporal.namespace})`,
    `Temporal UI ${settings.temporal.uiUrl ?? '(external cluster: set TEMPORAL_UI_URL)'}`,
    `MinIO S3   ${settings.s3.endpoint} (bucket ${settings.s3.bucket})`,
    `MinIO console ${settings.s3.consoleUrl ?? '(external S3)'}`,
  ];
}
