/**
 * When a long-running CLI command (`dartflow workers`) must stop: SIGINT (Ctrl-C), SIGTERM (`kill <pid>`),
 * SIGHUP (terminal closed), or — when it runs under an npm/npx wrapper — that wrapper vanishing.
 * `npx dartflow workers` is `npm exec` → `sh -c dartflow workers` → this process: the pid a user sees in
 * `ps` is npm's, and a kill of it (npm forwards the signal to `sh`, which dies without passing it on) or a
 * kill -9 would otherwise leave this process and its roles running, re-parented to init.
 */
import fs from 'node:fs';

export type StopReason = 'SIGINT' | 'SIGTERM' | 'SIGHUP' | 'wrapper-gone';

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export interface ProcInfo {
  pid: number;
  ppid: number;
  /** /proc/<pid>/cmdline split at NULs (npm rewrites its title: "npm exec dartflow workers" in one piece). */
  argv: string[];
}

function words(argv: readonly string[]): string[] {
  return argv
    .join(' ')
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => w.split('/').pop() ?? w);
}

/** npm exec / npx / npm run: wrappers that end when they are killed, unlike a shell under nohup. */
export function isPackageRunner(argv: readonly string[]): boolean {
  const [exe, script] = words(argv);
  if (exe === 'npm' || exe === 'npx') return true;
  return !!exe?.startsWith('node') && ['npm-cli.js', 'npx-cli.js', 'npm', 'npx'].includes(script ?? '');
}

/** `sh -c …` (how npm runs a bin) and tsx's CLI: pass-through layers between npm and this process. */
function isPassThrough(argv: readonly string[]): boolean {
  const [exe, second] = words(argv);
  if (['sh', 'dash', 'bash'].includes(exe ?? '')) return argv[1] === '-c';
  return !!exe?.startsWith('node') && (second === 'tsx' || argv.some((a) => a.includes('/tsx/dist/cli.')));
}

/**
 * The ancestors (nearest first) that only wrap this command, when they lead up to npm/npx; empty when the
 * parent is anything else (a shell, nohup, systemd, a test): then only signals stop the command.
 */
export function wrapperChain(ancestors: readonly ProcInfo[]): ProcInfo[] {
  const chain: ProcInfo[] = [];
  for (const p of ancestors) {
    chain.push(p);
    if (isPackageRunner(p.argv)) return chain;
    if (!isPassThrough(p.argv)) return [];
  }
  return [];
}

/** True while every wrapper is alive and still the parent of the one below it. */
export function chainIntact(
  selfPpid: number,
  chain: readonly ProcInfo[],
  ppidOf: (pid: number) => number | undefined
): boolean {
  if (chain.length === 0) return true;
  if (selfPpid !== chain[0]!.pid) return false;
  return chain.every((p, i) => {
    const now = ppidOf(p.pid);
    // The topmost wrapper (npm) may be re-parented (nohup npx …): only its being alive matters.
    return i === chain.length - 1 ? now !== undefined : now === p.ppid;
  });
}

function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields 3 (state) and 4 (ppid) follow the parenthesised command name, which may contain spaces.
    const [state, ppidField] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state === 'Z') return undefined; // dead, not yet reaped by its parent
    const ppid = Number(ppidField);
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return { pid, ppid, argv };
  } catch {
    return undefined;
  }
}

function ancestors(max = 4): ProcInfo[] {
  const out: ProcInfo[] = [];
  let pid = process.ppid;
  while (out.length < max && pid > 1) {
    const p = readProc(pid);
    if (!p) break;
    out.push(p);
    pid = p.ppid;
  }
  return out;
}

export interface StopRequest {
  /** Resolves with the first reason to stop. */
  readonly stopped: Promise<StopReason>;
  /** Stops listening (signals return to Node's defaults). */
  dispose(): void;
}

/**
 * Listens for a stop request. `onRepeat` runs on every further signal after the first (a second Ctrl-C:
 * "stop now, do not wait for the graceful path").
 */
export function listenForStop(opts: { onRepeat?: () => void; pollMs?: number } = {}): StopRequest {
  let resolveStop!: (reason: StopReason) => void;
  const stopped = new Promise<StopReason>((resolve) => (resolveStop = resolve));
  let first = true;
  const request = (reason: StopReason) => {
    if (first) {
      first = false;
      resolveStop(reason);
    } else if (reason !== 'wrapper-gone') opts.onRepeat?.();
  };
  const handlers = STOP_SIGNALS.map((signal) => {
    const handler = () => request(signal);
    process.on(signal, handler);
    return [signal, handler] as const;
  });
  const chain = wrapperChain(ancestors());
  const timer =
    chain.length > 0
      ? setInterval(() => {
          if (!chainIntact(process.ppid, chain, (pid) => readProc(pid)?.ppid)) request('wrapper-gone');
        }, opts.pollMs ?? 1000)
      : undefined;
  timer?.unref();
  return {
    stopped,
    dispose() {
      for (const [signal, handler] of handlers) process.off(signal, handler);
      if (timer) clearInterval(timer);
    },
  };
}
