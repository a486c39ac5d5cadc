/**
 * Holds a set of processes to a fixed CPU budget for the length of a benchmark window, with a Linux cgroup:
 * - a CPU quota (createCpuCap): `cores` = 1.5 lets them use 1.5 cores' worth of CPU time per scheduling
 *   period, on any core, whatever else runs;
 * - a cpuset (createCpuSet): they run on the listed CPUs only. Two sets that split the CPUs between vLLM and
 *   the bench's other processes keep each side off the other's CPUs (not exclusive: kernel threads and
 *   processes outside the bench may still run there; L3 and memory bandwidth stay shared).
 * The VLM bench uses them to give vLLM the same compute in the episode-loop window and in the direct drive,
 * the way an inference machine of its own would (DART's env cluster and rollout servers are separate
 * machines); on a shared 2-core machine the loop's own processes otherwise take their CPU from vLLM.
 *
 * Works with cgroup v1 (writable `cpu` / `cpuset` hierarchies) or v2 (a writable hierarchy whose root
 * enables the `cpu` / `cpuset` controller). Needs root. Moving a process moves all its threads; children it
 * starts later inherit the group.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { procStatFields } from './proc-cpu';

/** Scheduling period: short, so a group out of quota waits at most this long (vLLM's steps are 10–50 ms). */
const PERIOD_US = 20_000;

type Controller = 'cpu' | 'cpuset';

interface Hierarchy {
  kind: 'v1' | 'v2';
  root: string;
  controller: Controller;
}

function findHierarchy(controller: Controller): Hierarchy | string {
  const v1 = `/sys/fs/cgroup/${controller}`;
  const v1File = controller === 'cpu' ? 'cpu.cfs_quota_us' : 'cpuset.cpus';
  if (fs.existsSync(path.join(v1, v1File))) return { kind: 'v1', root: v1, controller };
  for (const root of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    try {
      const controllers = fs.readFileSync(path.join(root, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
      if (controllers.includes(controller)) return { kind: 'v2', root, controller };
    } catch {
      // not a v2 root with delegated controllers
    }
  }
  return `no cgroup hierarchy with the ${controller} controller (v1 /sys/fs/cgroup/${controller}, or v2 with "${controller}" in cgroup.subtree_control)`;
}

/** A cgroup the bench moves processes into for a window. */
export interface CpuGroup {
  readonly path: string;
  /** Moves `pids` into the group (a PID that has exited is skipped). */
  add(pids: readonly number[]): void;
  /** The processes in the group now. */
  members(): number[];
  /** Moves every process in the group back to where it was (best effort, warns) and removes the group. */
  release(): void;
}

export interface CpuCap extends CpuGroup {
  readonly cores: number;
}

export interface CpuSet extends CpuGroup {
  readonly cpus: readonly number[];
}

/**
 * A cgroup named `name` capped at `cores` cores. Throws an error that says what is missing when the
 * machine has no writable cgroup CPU controller (not root, or a container without it).
 */
export function createCpuCap(name: string, cores: number): CpuCap {
  if (!(cores > 0)) throw new RangeError(`cpu cap: cores must be > 0, got ${cores}`);
  const quota = Math.round(cores * PERIOD_US);
  const group = createGroup('cpu cap', 'cpu', name, (h, dir) => {
    if (h.kind === 'v1') {
      fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
    } else {
      fs.writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
    }
  });
  return { ...group, cores };
}

/**
 * A cgroup named `name` whose processes run on `cpus` only. Moving a process into a cpuset overwrites its
 * threads' CPU affinity on kernels before 6.2 (later ones keep the affinity a thread asked for and apply it
 * again when it leaves); vLLM pins its OpenMP threads to a core at start-up, so release() gives every thread
 * back the affinity it had, whatever the kernel. Throws like createCpuCap where cpusets cannot be made.
 */
export function createCpuSet(name: string, cpus: readonly number[]): CpuSet {
  const online = onlineCpus();
  const bad = cpus.filter((c) => !Number.isInteger(c) || !online.includes(c));
  if (cpus.length === 0 || bad.length > 0)
    throw new RangeError(`cpu set: cpus must be some of the online CPUs ${online.join(',')}, got [${cpus.join(',')}]`);
  const affinity = new Map<string, ThreadAffinity>(); // thread (pid/tid) → its affinity before add()
  const group = createGroup(
    'cpu set',
    'cpuset',
    name,
    (h, dir) => {
      // A cpuset takes no process until it has both CPUs and memory nodes; use the parent's memory nodes.
      const mems = fs.readFileSync(
        path.join(h.root, h.kind === 'v1' ? 'cpuset.mems' : 'cpuset.mems.effective'),
        'utf8'
      );
      fs.writeFileSync(path.join(dir, 'cpuset.cpus'), cpus.join(','));
      fs.writeFileSync(path.join(dir, 'cpuset.mems'), mems.trim());
    },
    () => {
      for (const before of affinity.values()) {
        const now = threadAffinity(before.pid, before.tid);
        // Only the same thread (a thread id can be reused by another process's thread meanwhile), and only
        // where the affinity differs (kernels from 6.2 on have already re-applied it).
        if (!now || now.startTicks !== before.startTicks || now.list === before.list) continue;
        try {
          execFileSync('taskset', ['-pc', before.list, String(before.tid)], { stdio: 'ignore' });
        } catch {
          // the thread has exited (or taskset is missing: the kernel's default, every CPU, stays)
        }
      }
      affinity.clear();
    }
  );
  return {
    ...group,
    cpus,
    add(pids) {
      for (const pid of pids)
        for (const th of threadAffinities(pid))
          if (!affinity.has(`${pid}/${th.tid}`)) affinity.set(`${pid}/${th.tid}`, th);
      group.add(pids);
    },
  };
}

/** The machine's online CPUs (/sys/devices/system/cpu/online, e.g. "0-1"). */
export function onlineCpus(): number[] {
  const text = fs.readFileSync('/sys/devices/system/cpu/online', 'utf8').trim();
  return text.split(',').flatMap((part) => {
    const [a, b] = part.split('-').map(Number);
    return b === undefined ? [a!] : Array.from({ length: b - a! + 1 }, (_, i) => a! + i);
  });
}

interface ThreadAffinity {
  pid: number;
  tid: number;
  /** Cpus_allowed_list, e.g. "0-1". */
  list: string;
  /** When the thread started (clock ticks since boot): tells a reused thread id from the thread recorded. */
  startTicks: number;
}

/** One thread's CPU affinity list and start time (/proc/<pid>/task/<tid>/{status,stat}); undefined if gone. */
function threadAffinity(pid: number, tid: number): ThreadAffinity | undefined {
  try {
    const dir = `/proc/${pid}/task/${tid}`;
    const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(fs.readFileSync(`${dir}/status`, 'utf8'));
    const startTicks = Number(procStatFields(`${dir}/stat`)[19]); // field 22: starttime
    return m ? { pid, tid, list: m[1]!, startTicks } : undefined;
  } catch {
    return undefined;
  }
}

/** Each thread of `pid` with its CPU affinity list and start time. */
function threadAffinities(pid: number): ThreadAffinity[] {
  let tids: string[];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // exited
  }
  return tids.flatMap((tid) => threadAffinity(pid, Number(tid)) ?? []);
}

/** The group mechanics both kinds share: make it, move processes in, move them back and remove it. */
function createGroup(
  what: string,
  controller: Controller,
  name: string,
  configure: (h: Hierarchy, dir: string) => void,
  /** Runs at the end of release(), once the processes are out (a cpuset restores their threads' affinity). */
  afterRelease: () => void = () => undefined
): CpuGroup {
  const h = findHierarchy(controller);
  if (typeof h === 'string') throw new Error(`${what}: ${h}; run without it`);
  sweepOrphans(h);
  const dir = path.join(h.root, name);
  try {
    fs.mkdirSync(dir, { recursive: true });
    configure(h, dir);
  } catch (err) {
    try {
      fs.rmdirSync(dir); // made but not configured: not left behind
    } catch {
      // never made
    }
    throw new Error(
      `${what}: cannot create ${dir} (${(err as Error).message}); it needs root and a writable cgroup hierarchy`
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
  const members = (): number[] => {
    try {
      return fs.readFileSync(procs(dir), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return []; // the group is gone already
    }
  };
  const group: CpuGroup = {
    path: dir,
    members,
    add(pids) {
      for (const pid of pids) {
        const from = cgroupOf(pid, h);
        if (from === undefined) continue; // exited
        // A process still in another bench's group goes back to the root, never into a group of ours.
        if (!origin.has(pid)) origin.set(pid, path.basename(from).startsWith(GROUP_PREFIX) ? h.root : from);
        move(pid, dir);
      }
    },
    release() {
      process.off('exit', releaseOnExit);
      // Best effort: a measurement must not be lost to a process that will not move back.
      for (const pid of members()) {
        try {
          move(pid, origin.get(pid) ?? h.root);
        } catch (err) {
          console.warn(`${what}: could not move process ${pid} out of ${dir}: ${(err as Error).message}`);
        }
      }
      // A process killed just before may still be listed until it is reaped: retry briefly.
      for (let tries = 0; fs.existsSync(dir); tries++) {
        try {
          fs.rmdirSync(dir);
        } catch (err) {
          if (tries >= 40) {
            console.warn(`${what}: could not remove ${dir}: ${(err as Error).message}`);
            break;
          }
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
        }
      }
      afterRelease();
    },
  };
  // A bench that ends while the group holds processes (an error, SIGTERM → process.exit) must not leave
  // Temporal, MinIO or vLLM held to a quota or to one CPU: release() is synchronous, so it runs on exit too.
  const releaseOnExit = () => group.release();
  process.once('exit', releaseOnExit);
  return group;
}

/** Every group this module makes is named `dartflow-…-<pid of the process that made it>`. */
const GROUP_PREFIX = 'dartflow-';

/**
 * Removes groups left by a process that was killed outright (SIGKILL, the OOM killer: no exit hook ran), so
 * servers a later run reuses (Temporal, MinIO) do not stay held to a quota or one CPU: their processes go
 * back to the root group.
 */
function sweepOrphans(h: Hierarchy): void {
  let names: string[];
  try {
    names = fs.readdirSync(h.root);
  } catch {
    return;
  }
  for (const name of names) {
    const owner = /^dartflow-.*-(\d+)$/.exec(name)?.[1];
    if (!name.startsWith(GROUP_PREFIX) || owner === undefined || fs.existsSync(`/proc/${owner}`)) continue;
    const dir = path.join(h.root, name);
    try {
      for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean))
        fs.writeFileSync(path.join(h.root, 'cgroup.procs'), pid);
      fs.rmdirSync(dir);
      console.warn(`cpu groups: removed ${dir}, left by process ${owner} that is gone`);
    } catch (err) {
      console.warn(`cpu groups: could not remove ${dir} (left by process ${owner}): ${(err as Error).message}`);
    }
  }
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
    const matches = h.kind === 'v1' ? controllers!.split(',').includes(h.controller) : id === '0';
    if (matches) return path.join(h.root, rel);
  }
  return h.root;
}

function assertNiceness(nice: number): void {
  if (!Number.isInteger(nice) || nice < -20 || nice > 19)
    throw new Error(`niceness ${nice}: give an integer from -20 (first) to 19 (last)`);
}

/**
 * Sets the scheduling niceness of every thread of `pids`. Linux niceness is per thread: setpriority on a
 * PID changes only its main thread, and threads already running keep theirs (threads made later inherit it
 * from the thread that makes them). Processes or threads gone meanwhile are skipped. Returns how many
 * threads were set. A negative niceness needs CAP_SYS_NICE.
 */
export function niceThreads(pids: readonly number[], nice: number): number {
  assertNiceness(nice);
  let set = 0;
  for (const pid of pids) {
    let tids: string[];
    try {
      tids = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone
    }
    for (const tid of tids) {
      try {
        os.setPriority(Number(tid), nice);
        set++;
      } catch (err) {
        if (fs.existsSync(`/proc/${pid}/task/${tid}`)) throw err; // not just gone meanwhile
      }
    }
  }
  return set;
}

/** A process's autogroup (/proc/<pid>/autogroup: "/autogroup-<id> nice <n>"), or undefined (gone, or no autogroups). */
export function autogroupOf(pid: number): { id: string; nice: number } | undefined {
  try {
    const m = /^(\/autogroup-\d+) nice (-?\d+)/.exec(fs.readFileSync(`/proc/${pid}/autogroup`, 'utf8'));
    return m ? { id: m[1]!, nice: Number(m[2]) } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Sets the niceness of the autogroups `pids` run in. Where the kernel groups processes by session
 * (CONFIG_SCHED_AUTOGROUP, /proc/sys/kernel/sched_autogroup_enabled = 1, processes in the root cgroup), the CPU
 * is shared between those groups first, and a thread's niceness weighs only inside its own group — so a nice
 * thread in one session does not yield to a busy one in another. Only groups made of `pids` alone are changed
 * (a session shared with other processes is reported in `shared`, not touched). Returns the groups changed.
 */
export function niceAutogroups(pids: readonly number[], nice: number): { changed: string[]; shared: string[] } {
  assertNiceness(nice);
  const mine = new Set(pids);
  const groups = new Map<string, number[]>();
  for (const d of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    const g = autogroupOf(Number(d));
    if (g) groups.set(g.id, [...(groups.get(g.id) ?? []), Number(d)]);
  }
  const wanted = new Set(pids.flatMap((pid) => autogroupOf(pid)?.id ?? []));
  const changed: string[] = [];
  const shared: string[] = [];
  for (const id of wanted) {
    const members = groups.get(id) ?? [];
    if (members.some((pid) => !mine.has(pid))) {
      shared.push(id);
      continue;
    }
    fs.writeFileSync(`/proc/${members[0]}/autogroup`, String(nice));
    changed.push(id);
  }
  return { changed, shared };
}
