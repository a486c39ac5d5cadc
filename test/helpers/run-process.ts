/** Runs a command to its end without blocking the event loop, so a test file can run several side by side. */
import { spawn } from 'node:child_process';

export interface ProcessOutcome {
  /** Exit code; null when it was killed (timeout) or could not start. */
  code: number | null;
  /** stdout and stderr interleaved as they arrived, plus the reason when it did not exit by itself. */
  output: string;
}

export function runProcess(
  cmd: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }
): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(opts.timeoutMs ? { timeout: opts.timeoutMs } : {}),
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', (err) => resolve({ code: null, output: `${output}\n${String(err)}` }));
    child.on('close', (code, signal) =>
      resolve({ code, output: code === null ? `${output}\nkilled by ${signal ?? 'unknown signal'}` : output })
    );
  });
}
