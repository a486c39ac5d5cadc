/**
 * The command line that runs a role at a lower CPU priority, all of it: every thread of the role and
 * everything it starts (the env worker's Chromium).
 *
 * Why not setpriority on the child's PID after spawn: Linux niceness is per thread, so that reaches only
 * the main thread and races with the threads the runtime starts at once; `nice -n N` sets it before exec,
 * so every thread inherits it. Why setpriv as root: Chromium gives its own threads priorities (nice 0 for
 * most, -8 for compositing and IO), and with CAP_SYS_NICE — root's — it may lower its niceness below the
 * one inherited, so a "nice 10" env worker ran its Chromium at 0 and -8 (measured: 78 threads at 0, 27 at
 * -8). Without CAP_SYS_NICE in its bounding set a process cannot go below the niceness it was given.
 * As any other user it cannot anyway (RLIMIT_NICE 0), so there the plain `nice` is enough.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface NiceCommandContext {
  /** Whether this process runs as root (has CAP_SYS_NICE). */
  root: boolean;
  /** setpriv (util-linux), or undefined when not installed. */
  setpriv: string | undefined;
}

/**
 * `command` run at niceness `nice` (0 = normal: unchanged … 19 = last); as root also without CAP_SYS_NICE. Throws on a
 * niceness out of range, and as root without setpriv (the niceness would not hold for Chromium).
 */
export function niceCommand(nice: number, command: readonly string[], ctx: NiceCommandContext): string[] {
  if (!Number.isInteger(nice) || nice < 0 || nice > 19)
    throw new Error(
      `niceness ${nice}: give an integer from 0 (normal) to 19 (last); raising priority is not supported`
    );
  if (command.length === 0) throw new Error('niceCommand: no command');
  if (nice === 0) return [...command]; // normal: as if not given (Chromium keeps its own priorities)
  const niced = ['nice', '-n', String(nice), ...command];
  if (!ctx.root) return niced;
  if (!ctx.setpriv)
    throw new Error(
      'niceness as root needs setpriv (util-linux, `apt-get install -y util-linux`): without it Chromium lowers its threads back to 0 and -8'
    );
  return [ctx.setpriv, '--bounding-set=-sys_nice', '--inh-caps=-sys_nice', ...niced];
}

/** The first `name` on PATH that is a file, or undefined. */
export function onPath(name: string, pathVar = process.env.PATH ?? ''): string | undefined {
  for (const dir of pathVar.split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** This process's context for niceCommand. */
export function niceCommandContext(): NiceCommandContext {
  return { root: process.getuid?.() === 0, setpriv: onPath('setpriv') };
}
