/**
 * Starts the OSWorld sidecar (`python -m dartflow_osworld`) as a child process on a free loopback port
 * and waits for its `LISTENING <url>` line. For tests and single-box runs; on a cluster it runs as its
 * own service (docs/osworld.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../infra/settings';

export const OSWORLD_VENV = path.join(PROJECT_ROOT, '.tools', 'osworld-venv');
export const OSWORLD_PYTHON = path.join(OSWORLD_VENV, 'bin', 'python');

export interface SidecarProcess {
  url: string;
  child: ChildProcess;
  /** Everything the sidecar logged (stderr), for test failure messages. */
  log(): string;
  stop(): Promise<void>;
}

export function osworldVenvMissing(): string | false {
  return fs.existsSync(OSWORLD_PYTHON)
    ? false
    : `the OSWorld sidecar venv is not installed (${OSWORLD_VENV}): run 'bash infra/install-osworld.sh'`;
}

export async function startSidecar(
  opts: { cacheDir: string; args?: string[]; env?: NodeJS.ProcessEnv; startTimeoutMs?: number } & { python?: string }
): Promise<SidecarProcess> {
  const python = opts.python ?? OSWORLD_PYTHON;
  const child = spawn(
    python,
    [
      '-m',
      'dartflow_osworld',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--cache-dir',
      opts.cacheDir,
      ...(opts.args ?? []),
    ],
    { cwd: path.join(PROJECT_ROOT, 'python'), env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] }
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr = (stderr + d).slice(-200_000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`OSWorld sidecar did not start within ${opts.startTimeoutMs ?? 60_000} ms:\n${stderr}`)),
      opts.startTimeoutMs ?? 60_000
    );
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /LISTENING (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`OSWorld sidecar exited with code ${code} before listening:\n${stderr}`));
    });
  });
  return {
    url,
    child,
    log: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
