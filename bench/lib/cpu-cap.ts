/**
 * Holds a set of processes to a fixed CPU budget (a Linux cgroup CPU quota) for the length of a benchmark
 * window: `cores` = 1.5 lets them use 1.5 cores' worth of CPU time per scheduling period, whatever else runs.
 * The VLM bench uses it to give vLLM the same compute in the episode-loop window and in the direct drive, the
 * way an inference machine of its own would (DART's env cluster and rollout servers are separate machines);
 * on a shared 2-core machine the loop's own processes otherwise take their CPU from vLLM.
 *
 * Works with cgroup v1 (a writable `cpu` hierarchy: cfs_quota_us/cfs_period_us) or v2 (a writable hierarchy
 * whose root enables the `cpu` controller: cpu.max). Needs root. Moving a process moves all its threads;
 * children it starts later inherit the group.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Scheduling period: short, so a group out of quota waits at most this long (vLLM's steps are 10–50 ms). */
const PERIOD_US = 20_000;

interface Hierarchy {
  kind: 'v1' | 'v2';
  root: string;
}

function findHierarchy(): Hierarchy | string {
  const v1 = '/sys/fs/cgroup/cpu';
  if (fs.existsSync(path.join(v1, 'cpu.cfs_quota_us'))) return { kind: 'v1', root: v1 };
  for (const root of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    try {
      const controllers = fs.readFileSync(path.join(root, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
      if (controllers.includes('cpu')) return { kind: 'v2', root };
    } catch {
      // not a v2 root with delegated controllers
    }
  }
  return 'no cgroup hierarchy with the cpu controller (v1 /sys/fs/cgroup/cpu, or v2 with "cpu" in cgroup.subtree_control)';
}

export interface CpuCap {
  readonly cores: number;
  readonly path: string;
  /** Moves `pids` into the group (a PID that has exited is skipped). */
  add(pids: readonly number[]): void;
  /** Moves every process in the group back to where it was (best effort, warns) and removes the group. */
  release(): void;
}

/**
 * A cgroup named `name` capped at `cores` cores. Throws an error that says what is missing when the
 * machine has no writable cgroup CPU controller (not root, or a container without it).
 */
export function createCpuCap(name: string, cores: number): CpuCap {
  if (!(cores > 0)) throw new RangeError(`cpu cap: cores must be > 0, got ${cores}`);
  const h = findHierarchy();
  if (typeof h === 'string') throw new Error(`cpu cap: ${h}; run without the cap`);
  const dir = path.join(h.root, name);
  const quota = Math.round(cores * PERIOD_US);
  try {
    fs.mkdirSync(dir, { recursive: true });
    if (h.kind === 'v1') {
      fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
    } else {
      fs.writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
    }
  } catch (err) {
    throw new Error(
      `cpu cap: cannot create ${dir} (${(err as Error).message}); the cap needs root and a writable cgroup hierarchy`
    );
  }
  const procs = (d: string) => path.join(d, 'cgroup.procs');
  const move = (pid: number, to: string) => {
    try {
      fs.writeFileSync(procs(to), String(pid));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err; // exited meanwhile
    }
  };
  /** Where each process was before add(): release() puts it back there. */
  const origin = new Map<number, string>();
  return {
    cores,
    path: dir,
    add(pids) {
      for (const pid of pids) {
        const from = cgroupOf(pid, h);
        if (from === undefined) continue; // exited
        origin.set(pid, from);
        move(pid, dir);
      }
    },
    release() {
      // Best effort: a measurement must not be lost to a process that will not move back.
      let inside: number[] = [];
      try {
        inside = fs.readFileSync(procs(dir), 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        // the group is gone already
      }
      for (const pid of inside) {
        try {
          move(pid, origin.get(pid) ?? h.root);
        } catch (err) {
          console.warn(`cpu cap: could not move process ${pid} out of ${dir}: ${(err as Error).message}`);
        }
      }
      // A process killed just before may still be listed until it is reaped: retry briefly.
      for (let tries = 0; fs.existsSync(dir); tries++) {
        try {
          fs.rmdirSync(dir);
        } catch (err) {
          if (tries >= 40) {
            console.warn(`cpu cap: could not remove ${dir}: ${(err as Error).message}`);
            return;
          }
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
        }
      }
    },
  };
}

/** The directory of `pid`'s group in hierarchy `h`, from /proc/<pid>/cgroup; undefined if it exited. */
function cgroupOf(pid: number, h: Hierarchy): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [id, controllers, rel] = line.split(':');
    if (rel === undefined) continue;
    const matches = h.kind === 'v1' ? controllers!.split(',').includes('cpu') : id === '0';
    if (matches) return path.join(h.root, rel);
  }
  return h.root;
}
