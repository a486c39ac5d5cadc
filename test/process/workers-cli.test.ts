/**
 * `dartflow workers` started as a user starts it (node bin/dartflow.js), in a private namespace, bucket and
 * data dir: once its four roles are up and Chromium runs an episode, stopping the CLI's pid — SIGTERM
 * (`kill <pid>`), SIGINT (Ctrl-C), SIGHUP (terminal closed) or SIGKILL — must leave no process behind:
 * no role, no Chromium, nothing re-parented to init. Every process of the run is found by scanning /proc
 * for the run's unique data dir in its environment or command line.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { DartflowClient } from '../../client/dartflow-client';
import { registerScratchNamespace } from '../../infra/services';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { loadSuite } from '../../tasks/loader';
import { precollectWorkflow } from '../../workflows';
import { freePort, freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let settings: InfraSettings;
let cleanupBucket: () => Promise<void>;
let client: DartflowClient;
const started: ChildProcess[] = [];
const dataDirs: string[] = [];

before(async () => {
  const base = testSettings();
  const bucket = await freshBucket('workers-cli');
  cleanupBucket = bucket.cleanup;
  settings = {
    ...(await registerScratchNamespace(base, `dartflow-test-${uniqueSuffix()}`)),
    s3: { ...base.s3, bucket: bucket.store.bucket },
  };
  client = await DartflowClient.connect(settings);
});

after(async () => {
  for (const cli of started) if (cli.exitCode === null && cli.signalCode === null) cli.kill('SIGKILL');
  // A failed assertion must not leave the roles of this run behind for the next test file.
  for (const dir of dataDirs) for (const p of processesOf(dir)) killQuietly(p.pid);
  await client?.close();
  await cleanupBucket?.();
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
});

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

interface Proc {
  pid: number;
  ppid: number;
  /** Session id: Chromium (launched detached by Playwright) and each role lead their own session. */
  sid: number;
  /** Start time in clock ticks since boot: tells a process from a later one that reuses its pid. */
  start: string;
  cmd: string;
  marked: boolean;
}

function readProc(pid: number, marker: string): Proc | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: state ppid pgrp session … (field 22: starttime).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (f[0] === 'Z') return undefined; // dead, waiting to be reaped
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    let environ = '';
    try {
      environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
    } catch {
      // not ours to read
    }
    return {
      pid,
      ppid: Number(f[1]),
      sid: Number(f[3]),
      start: f[19] ?? '',
      cmd,
      marked: cmd.includes(marker) || environ.includes(marker),
    };
  } catch {
    return undefined; // exited meanwhile
  }
}

/**
 * Live processes of one run: those whose environment or command line mentions `marker`, and every process
 * in a session such a process leads (Chromium's zygote and renderers start with a cleaned environment).
 */
function processesOf(marker: string): Proc[] {
  const all = fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid)
    .map((e) => readProc(Number(e), marker))
    .filter((p): p is Proc => p !== undefined);
  const leaders = new Set(all.filter((p) => p.marked && p.sid === p.pid).map((p) => p.pid));
  return all.filter((p) => p.marked || leaders.has(p.sid));
}

/** Of `procs` (a snapshot), those still running: same pid and same start time. */
function stillRunning(procs: readonly Proc[], marker: string): Proc[] {
  return procs.filter((p) => readProc(p.pid, marker)?.start === p.start);
}

const show = (procs: readonly Proc[]) =>
  procs.map((p) => `${p.pid} (parent ${p.ppid}) ${p.cmd.slice(0, 110)}`).join('\n');

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(250);
  }
}

/** The roles' start-up lines, as the CLI echoes them (prefixed with the child's name). */
const READY = [
  `polling task queue "${TASK_QUEUES.orchestrator}"`,
  `polling task queue "${TASK_QUEUES.trainer}"`,
  `env slots on task queue "${TASK_QUEUES.env}"`,
  '[policy-p0] [policy-server p0] listening on',
];

async function startWorkersCli(
  label: string,
  via: 'bin' | 'npx'
): Promise<{ cli: ChildProcess; dataDir: string; output: () => string }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `dartflow-workers-${label}-`));
  dataDirs.push(dataDir);
  const args = ['workers', '--env-slots', '1', '--policy-port', String(await freePort())];
  // `npx dartflow …` is npm exec → sh -c → node bin/dartflow.js: the pid a user sees is npm's.
  const [command, argv] =
    via === 'npx'
      ? ['npx', ['--no-install', 'dartflow', ...args]]
      : [process.execPath, [path.join(PROJECT_ROOT, 'bin', 'dartflow.js'), ...args]];
  const cli = spawn(command, argv, {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      TEMPORAL_NAMESPACE: settings.temporal.namespace,
      S3_BUCKET: settings.s3.bucket,
      DARTFLOW_DATA_DIR: dataDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(cli);
  let text = '';
  cli.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  cli.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  return { cli, dataDir, output: () => text };
}

/** One oracle episode through the orchestrator and the env worker: the env worker launches Chromium. */
async function runOneEpisode(label: string): Promise<void> {
  const task = loadSuite('quickstart').taskSpecs[0] as unknown as { id: string } & Record<string, unknown>;
  await client.temporal.workflow.execute(precollectWorkflow, {
    taskQueue: TASK_QUEUES.orchestrator,
    workflowId: `workers-cli-${label}-${uniqueSuffix()}`,
    workflowExecutionTimeout: '3 minutes',
    args: [
      {
        campaignId: `workers-cli-${label}`,
        tasks: [task],
        successesPerTask: 1,
        maxAttemptsPerTask: 1,
        policyKind: 'oracle',
        endpoints: [],
        temperature: 1,
      },
    ],
  });
}

const SCENARIOS: Array<{ signal: NodeJS.Signals; how: string; via: 'bin' | 'npx' }> = [
  { signal: 'SIGTERM', how: 'kill <pid>', via: 'bin' },
  { signal: 'SIGINT', how: 'Ctrl-C', via: 'bin' },
  { signal: 'SIGHUP', how: 'terminal closed', via: 'bin' },
  { signal: 'SIGKILL', how: 'kill -9 <pid>: the roles notice their parent is gone', via: 'bin' },
  { signal: 'SIGKILL', how: 'kill -9 of npx: the CLI notices its wrapper is gone', via: 'npx' },
];

for (const { signal, how, via } of SCENARIOS) {
  test(`${signal} (${how}) of the workers CLI${via === 'npx' ? ' run by npx' : ''} stops every role and Chromium`, async (t) => {
    const label = `${signal.toLowerCase()}-${via}`;
    const { cli, dataDir, output } = await startWorkersCli(label, via);
    // On failure, end this run's processes: the next scenario's episode must reach its own env worker.
    t.after(() => {
      for (const p of processesOf(dataDir)) killQuietly(p.pid);
    });
    const cliExit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      cli.once('exit', (code, sig) => resolve({ code, signal: sig }))
    );
    await waitFor('the four roles to be up', () => READY.every((line) => output().includes(line)), 240_000).catch(
      (err: Error) => {
        throw new Error(`${err.message}\n--- CLI output ---\n${output()}`);
      }
    );
    await runOneEpisode(label);
    const running = processesOf(dataDir);
    const envWorker = running.find((p) => p.cmd.includes('workers/env-worker.ts'));
    const chromium = running.filter((p) => p.cmd.startsWith('/usr/lib/chromium/'));
    assert.equal(
      chromium.filter((p) => p.ppid === envWorker?.pid).length,
      1,
      `one Chromium browser process, started by the env worker:\n${show(running)}`
    );
    assert.ok(chromium.length >= 2, 'its zygote and renderers are found through its session');
    const roles = ['orchestrator-worker', 'env-worker', 'trainer-worker', 'policy-server'];
    for (const role of roles)
      assert.ok(
        running.some((p) => p.cmd.includes(`workers/${role}.ts`)),
        `${role} runs:\n${show(running)}`
      );
    const cliProcess = running.find((p) => /\/dartflow(\.js)? workers /.test(p.cmd));
    assert.ok(cliProcess, `the CLI runs:\n${show(running)}`);
    if (via === 'npx') assert.notEqual(cliProcess.pid, cli.pid, 'npx runs the CLI through wrapper processes');

    process.kill(cli.pid!, signal);
    const left = () => [...stillRunning(running, dataDir), ...processesOf(dataDir)];
    await waitFor('every process of the run to exit', () => left().length === 0, 120_000).catch((err: Error) => {
      throw new Error(`${err.message}; left:\n${show(left())}\n--- CLI output ---\n${output()}`);
    });
    const exit = await cliExit;
    if (signal === 'SIGKILL') assert.equal(exit.signal, 'SIGKILL');
    else assert.deepEqual(exit, { code: 0, signal: null }, `the CLI stops cleanly on ${signal}:\n${output()}`);
  });
}

test('kill -9 of the workers CLI while its roles are still starting: they exit without polling, well before the 90 s grace', async (t) => {
  const { cli, dataDir, output } = await startWorkersCli('sigkill-starting', 'bin');
  t.after(() => {
    for (const p of processesOf(dataDir)) killQuietly(p.pid);
  });
  const roles = ['orchestrator-worker', 'env-worker', 'trainer-worker'];
  // As soon as the role processes exist, before any is ready (the orchestrator bundles its workflows first).
  await waitFor(
    'the role processes to start',
    () => roles.every((role) => processesOf(dataDir).some((p) => p.cmd.includes(`workers/${role}.ts`))),
    120_000
  );
  const notReadyYet = READY.filter((line) => !output().includes(line));
  assert.ok(notReadyYet.length > 0, `some role is still starting when the CLI is killed:\n${output()}`);
  const running = processesOf(dataDir);
  process.kill(cli.pid!, 'SIGKILL');
  const left = () => [...stillRunning(running, dataDir), ...processesOf(dataDir)];
  // A role that learns of its parent's death while starting used to start polling anyway and linger until
  // the 90 s grace timer; it must now exit as soon as it is created.
  await waitFor('every process of the run to exit', () => left().length === 0, 60_000).catch((err: Error) => {
    throw new Error(`${err.message}; left:\n${show(left())}\n--- CLI output ---\n${output()}`);
  });
});
