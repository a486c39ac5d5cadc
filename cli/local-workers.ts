/**
 * Runs dartflow's roles on this machine as child processes (what `npm start` and `dartflow workers` do):
 * one orchestrator worker, N env workers, one trainer, M policy servers, and on request (`trainer-vlm`) the
 * Python VLM trainer (python/dartflow_vlm/worker.py, on TASK_QUEUES.trainerVlm). Each child logs to
 * .data/logs/<role>.log; stopping sends SIGTERM (graceful: in-flight work finishes) then SIGKILL.
 * Each child is its own process group, so a terminal's Ctrl-C reaches only the parent, which then stops
 * every child exactly once; a parent that dies without stopping them (kill -9) is noticed by the
 * children through their IPC channel (infra/parent-watch.ts).
 * On other machines run the same scripts one role at a time (README "Scaling out").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { InfraSettings } from '../infra/settings';
import { metricsEndpointConfig, type MetricsRole } from '../metrics/config';
import { niceCommand, niceCommandContext } from './nice-command';
import { PROJECT_ROOT } from '../infra/settings';
import { VLM_VENV, vlmPython } from '../infra/vllm';

export type Role = 'orchestrator' | 'env' | 'trainer' | 'policy' | 'trainer-vlm';
/** The roles started when none are named. */
export const ROLES: Role[] = ['orchestrator', 'env', 'trainer', 'policy'];
/** Every role `--roles` accepts: `trainer-vlm` needs the VLM venv and a base model, so it is never a default. */
export const ALL_ROLES: Role[] = [...ROLES, 'trainer-vlm'];

export interface LocalWorkersOptions {
  roles?: Role[];
  envWorkers?: number;
  envSlots?: number;
  envKind?: 'browser' | 'simulated' | 'remote' | 'osworld';
  simulatedProfile?: string;
  /** Simulated env latency multiplier (DARTFLOW_ENV_TIME_SCALE; CampaignConfig env.simulatedTimeScale). */
  simulatedTimeScale?: number;
  /** Simulated env: success probability of the bernoulli reward model (DARTFLOW_ENV_BERNOULLI_REWARD). */
  simulatedBernoulliReward?: number;
  policyServers?: number;
  policyBasePort?: number;
  /** Policy servers (`p<i>`) of 0…policyServers−1 not to start (a server lost for good stays lost on a restart). */
  skipPolicyServers?: string[];
  /** trainer-vlm: the Hugging Face folder the vLLM servers started from (else DARTFLOW_VLM_BASE_MODEL). */
  vlmBaseModel?: string;
  /** trainer-vlm: more flags for `python -m dartflow_vlm.worker` (e.g. ['--lora-rank', '8']). */
  vlmTrainerArgs?: string[];
  /**
   * trainer-vlm: data-parallel ranks (FSDP), one process each, started by the trainer process (its
   * `--world-size`; default 1). On a GPU machine: the GPUs the trainer may use (one rank per GPU).
   */
  vlmWorldSize?: number;
  /** Extra environment for every child. */
  env?: NodeJS.ProcessEnv;
  /**
   * Scheduling niceness per role (0 = normal, 19 = lowest) for every thread of the role and everything it
   * starts (the env worker's Chromium): the role runs under `nice -n`, and as root also without
   * CAP_SYS_NICE, which Chromium would use to lower its threads' niceness again (cli/nice-command.ts). On a
   * machine where envs and inference share the cores, a nice env worker lets the inference servers run
   * first; its episodes wait longer between steps. Where the kernel shares the CPU between sessions first
   * (autogroups: /proc/sys/kernel/sched_autogroup_enabled = 1 and processes in the root cgroup, as in many
   * containers) a thread's niceness weighs only inside its own session, and each role, vLLM server and
   * Chromium leads its own: there niceness does not order a role against vLLM (the VLM bench's --vllm-nice
   * sets vLLM's autogroups instead).
   */
  niceness?: Partial<Record<Role, number>>;
  /** Echo child output to this process's stdout (prefixed) as well as the log file. */
  echo?: boolean;
  /** Where child logs go (default <dataDir>/logs). */
  logDir?: string;
  /**
   * The checkout the role scripts run from (default this one). A deploy test runs an older build of the
   * orchestrator from an export of an older commit (bench/soak.ts --deploy-from); it needs node_modules.
   */
  projectRoot?: string;
  /**
   * Metrics endpoints of the children (docs/metrics.md). Unset: each derives its default port,
   * DARTFLOW_METRICS_BASE_PORT (9470) + role offset + its instance index, so the roles never collide.
   * A number: that base port (0 = no endpoints). A function: each child's port (tests pick free ones).
   */
  metricsPort?: number | ((child: { role: Role; name: string; index: number }) => number);
}

export interface LocalChild {
  role: Role;
  name: string;
  process: ChildProcess;
  logFile: string;
  /** Where the child serves Prometheus metrics (docs/metrics.md); undefined when it serves none. */
  metricsUrl?: string;
}

export interface LocalWorkers {
  children: LocalChild[];
  /** Restart one child by name (chaos tests kill -9 a role and bring it back). */
  restart(name: string): LocalChild;
  /** SIGTERM every child; SIGKILL the ones still running after `graceMs` (default 20 s). */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL every child now (a second Ctrl-C); Chromium follows its env worker (pipe closed). */
  kill(): void;
}

const SCRIPTS: Record<Exclude<Role, 'trainer-vlm'>, string> = {
  orchestrator: 'workers/orchestrator-worker.ts',
  env: 'workers/env-worker.ts',
  trainer: 'workers/trainer-worker.ts',
  policy: 'workers/policy-server.ts',
};

/** The Python VLM trainer's command line; a clear error when the venv or the base model is missing. */
function vlmTrainerCommand(opts: LocalWorkersOptions, env: NodeJS.ProcessEnv): string[] {
  const python = vlmPython();
  if (!python)
    throw new Error(`role trainer-vlm: no VLM environment at ${VLM_VENV}; run \`bash infra/install-vlm.sh\``);
  const baseModel = opts.vlmBaseModel ?? env.DARTFLOW_VLM_BASE_MODEL;
  if (!baseModel)
    throw new Error(
      'role trainer-vlm: no base model; pass --vlm-base-model DIR (or set DARTFLOW_VLM_BASE_MODEL) to the folder the vLLM servers started from'
    );
  const world = opts.vlmWorldSize ?? 1;
  if (!Number.isInteger(world) || world < 1)
    throw new Error(`role trainer-vlm: the world size must be a whole number ≥ 1, got ${world}`);
  return [
    python,
    '-m',
    'dartflow_vlm.worker',
    '--base-model',
    baseModel,
    ...(world > 1 ? ['--world-size', String(world)] : []),
    ...(opts.vlmTrainerArgs ?? []),
  ];
}

/** Each child's metrics variables (metrics/config.ts): a port of its own, never one shared by all. */
function localMetricsEnv(
  opts: LocalWorkersOptions,
  env: NodeJS.ProcessEnv
): (role: Role, name: string, index: number) => NodeJS.ProcessEnv {
  const inherited = env.DARTFLOW_METRICS_PORT?.trim();
  if (opts.metricsPort === undefined && inherited && inherited !== '0')
    throw new Error(
      `DARTFLOW_METRICS_PORT=${inherited} would give every role the same metrics port: unset it and set DARTFLOW_METRICS_BASE_PORT instead (each role gets base + its offset), or 0 for no endpoints`
    );
  return (role, name, index) => {
    const m = opts.metricsPort;
    if (typeof m === 'function') return { DARTFLOW_METRICS_PORT: String(m({ role, name, index })) };
    if (m === 0) return { DARTFLOW_METRICS_PORT: '0' };
    return {
      ...(m !== undefined ? { DARTFLOW_METRICS_BASE_PORT: String(m) } : {}),
      DARTFLOW_METRICS_INSTANCE: String(index),
    };
  };
}

/** The endpoint the child derives from its variables, as metrics/config.ts does inside it. */
export function childMetricsUrl(role: Role, env: NodeJS.ProcessEnv): string | undefined {
  try {
    const endpoint = metricsEndpointConfig(role as MetricsRole, env);
    if (!endpoint) return undefined;
    // A wildcard bind is reached on loopback; an IPv6 literal goes in brackets.
    const host = endpoint.host === '0.0.0.0' ? '127.0.0.1' : endpoint.host === '::' ? '::1' : endpoint.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${endpoint.port}/metrics`;
  } catch {
    return undefined; // the child reports a bad metrics variable itself
  }
}

const isRunning = (c: LocalChild): boolean => c.process.exitCode === null && c.process.signalCode === null;

export function startLocalWorkers(settings: InfraSettings, opts: LocalWorkersOptions = {}): LocalWorkers {
  const roles = opts.roles ?? ROLES;
  const logDir = opts.logDir ?? path.join(settings.dataDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  // `command`: a child that is not a TypeScript role script (the Python VLM trainer).
  // A niceness that cannot hold is refused before any role starts.
  const niceContext = niceCommandContext();
  for (const n of Object.values(opts.niceness ?? {})) if (n !== undefined) niceCommand(n, ['true'], niceContext);
  const specs: Array<{ role: Role; name: string; args: string[]; env: NodeJS.ProcessEnv; command?: string[] }> = [];
  const metricsEnv = localMetricsEnv(opts, { ...process.env, ...opts.env });
  if (roles.includes('policy')) {
    for (let i = 0; i < (opts.policyServers ?? 1); i++) {
      if (opts.skipPolicyServers?.includes(`p${i}`)) continue;
      specs.push({
        role: 'policy',
        name: `policy-p${i}`,
        args: ['--server-id', `p${i}`, '--port', String((opts.policyBasePort ?? 8700) + i)],
        env: metricsEnv('policy', `policy-p${i}`, i),
      });
    }
  }
  if (roles.includes('orchestrator'))
    specs.push({
      role: 'orchestrator',
      name: 'orchestrator',
      args: [],
      env: metricsEnv('orchestrator', 'orchestrator', 0),
    });
  if (roles.includes('trainer'))
    specs.push({ role: 'trainer', name: 'trainer', args: [], env: metricsEnv('trainer', 'trainer', 0) });
  if (roles.includes('trainer-vlm')) {
    // The Python worker has no metrics endpoint; it polls TASK_QUEUES.trainerVlm (its default queue).
    const command = vlmTrainerCommand(opts, { ...process.env, ...opts.env });
    // With no IPC channel it cannot watch this process (infra/parent-watch.ts): it arms PR_SET_PDEATHSIG
    // (SIGTERM when this process ends, a process.exit in a SIGTERM handler or a kill -9 alike) when it sees
    // DARTFLOW_PARENT_PID (python/dartflow_vlm/worker.py exit_with_parent). Without it a bench stopped with
    // `kill` left the trainer polling a Temporal server that had gone.
    specs.push({
      role: 'trainer-vlm',
      name: 'trainer-vlm',
      args: [],
      env: { DARTFLOW_PARENT_PID: String(process.pid) },
      command,
    });
  }
  if (roles.includes('env')) {
    for (let i = 0; i < (opts.envWorkers ?? 1); i++) {
      specs.push({
        role: 'env',
        name: `env-${i}`,
        args: [],
        env: {
          ...metricsEnv('env', `env-${i}`, i),
          DARTFLOW_ENV_KIND: opts.envKind ?? 'browser',
          DARTFLOW_ENV_SLOTS: String(opts.envSlots ?? 4),
          ...(opts.simulatedProfile ? { DARTFLOW_ENV_PROFILE: opts.simulatedProfile } : {}),
          ...(opts.simulatedTimeScale !== undefined
            ? { DARTFLOW_ENV_TIME_SCALE: String(opts.simulatedTimeScale) }
            : {}),
          ...(opts.simulatedBernoulliReward !== undefined
            ? { DARTFLOW_ENV_BERNOULLI_REWARD: String(opts.simulatedBernoulliReward) }
            : {}),
        },
      });
    }
  }

  const children = new Map<string, LocalChild>();
  const launch = (spec: (typeof specs)[number]): LocalChild => {
    const logFile = path.join(logDir, `${spec.name}.log`);
    const out = fs.openSync(logFile, 'a');
    // `node --import tsx script`: one process per role, so a signal (or kill -9) reaches the worker itself.
    // The Python trainer gets no IPC channel (it watches this process through PR_SET_PDEATHSIG instead).
    // DARTFLOW_ROLE_NODE_ARGS: extra node flags for every TypeScript role, e.g. `--cpu-prof --cpu-prof-dir=DIR`
    // to profile each role (node refuses --cpu-prof in NODE_OPTIONS).
    const command = spec.command ?? [
      process.execPath,
      ...(process.env.DARTFLOW_ROLE_NODE_ARGS ?? '').split(' ').filter(Boolean),
      '--import',
      'tsx',
      path.join(opts.projectRoot ?? PROJECT_ROOT, SCRIPTS[spec.role as keyof typeof SCRIPTS]),
    ];
    const nice = opts.niceness?.[spec.role];
    // Every thread of the role and all it starts at that niceness, Chromium included (cli/nice-command.ts).
    const [file, ...argv] = nice === undefined ? command : niceCommand(nice, command, niceContext);
    const child = spawn(file!, [...argv, ...spec.args], {
      cwd: opts.projectRoot ?? PROJECT_ROOT,
      env: { ...process.env, ...opts.env, ...spec.env },
      stdio: ['ignore', opts.echo ? 'pipe' : out, opts.echo ? 'pipe' : out, ...(spec.command ? [] : ['ipc' as const])],
      // Own process group: a terminal's SIGINT goes to the parent only, not twice to every role.
      detached: true,
    });
    if (opts.echo) {
      for (const stream of [child.stdout, child.stderr]) {
        stream?.on('data', (d: Buffer) => {
          fs.appendFileSync(logFile, d);
          for (const line of d.toString().split('\n')) if (line.trim()) console.log(`[${spec.name}] ${line}`);
        });
      }
    }
    fs.closeSync(out);
    const metricsUrl = spec.command
      ? undefined
      : childMetricsUrl(spec.role, { ...process.env, ...opts.env, ...spec.env });
    const c = { role: spec.role, name: spec.name, process: child, logFile, ...(metricsUrl ? { metricsUrl } : {}) };
    children.set(spec.name, c);
    return c;
  };
  specs.forEach(launch);

  return {
    get children() {
      return [...children.values()];
    },
    restart(name: string) {
      const spec = specs.find((s) => s.name === name);
      if (!spec) throw new Error(`no local worker named ${name}`);
      return launch(spec);
    },
    async stop(graceMs = 20_000) {
      const alive = [...children.values()].filter(isRunning);
      const exited = Promise.all(
        alive.map(
          (c) => new Promise<void>((resolve) => (isRunning(c) ? c.process.once('exit', () => resolve()) : resolve()))
        )
      );
      for (const c of alive) c.process.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), graceMs)));
      if ((await Promise.race([exited, timeout])) === 'timeout') {
        for (const c of alive) if (isRunning(c)) c.process.kill('SIGKILL');
        await exited;
      }
      clearTimeout(timer);
    },
    kill() {
      for (const c of children.values()) if (isRunning(c)) c.process.kill('SIGKILL');
    },
  };
}
