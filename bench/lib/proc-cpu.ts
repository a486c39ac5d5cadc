/**
 * CPU time of processes by PID from /proc (Linux): which role a benchmark's cores went to (workers,
 * policy server, Temporal dev server, MinIO). Reading /proc only; never signals anything.
 */
import fs from 'node:fs';
import { loadInfraSettings } from '../../infra/settings';
import { recordedPid } from '../../infra/services';

const TICKS_PER_SECOND = 100; // CLK_TCK on Linux

/**
 * The fields of a /proc stat file (`/proc/<pid>/stat`, `/proc/<pid>/task/<tid>/stat`) after the ")" that closes
 * the command name: index 0 is field 3 (state), so field n (1-based) is at n - 3. Throws when it is gone.
 */
export function procStatFields(statPath: string): string[] {
  const stat = fs.readFileSync(statPath, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** User + system CPU seconds of a live process, or undefined when it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const rest = procStatFields(`/proc/${pid}/stat`); // utime is field 14, stime 15
    return (Number(rest[11]) + Number(rest[12])) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export interface CpuSample {
  at: number;
  seconds: Record<string, number>;
}

export function sampleCpu(pids: Record<string, number | undefined>): CpuSample {
  const seconds: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    const s = pid === undefined ? undefined : cpuSeconds(pid);
    if (s !== undefined) seconds[name] = s;
  }
  return { at: Date.now(), seconds };
}

/** Cores used per process between two samples (1.0 = one core fully busy). */
export function coresBetween(a: CpuSample, b: CpuSample): Record<string, number> {
  const wall = Math.max(1e-3, (b.at - a.at) / 1000);
  const out: Record<string, number> = {};
  for (const [name, s] of Object.entries(b.seconds)) {
    const before = a.seconds[name];
    if (before !== undefined) out[name] = Number(((s - before) / wall).toFixed(3));
  }
  return out;
}

/** PIDs of the shared local servers (as infra/services.ts recorded them), when they run here. */
export function serverPids(): Record<string, number | undefined> {
  const settings = loadInfraSettings();
  return {
    'temporal-dev-server': recordedPid(settings, 'temporal', 'temporal'),
    minio: recordedPid(settings, 'minio', 'minio'),
  };
}
