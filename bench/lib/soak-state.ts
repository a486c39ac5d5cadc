/**
 * The faults soak's own ledger, so one campaign can outlive the process that drives it (issue 12,
 * deliverable 5): a soak of 10⁵ episodes and 2·10³ train steps takes longer than one sitting on a 2-core
 * machine. The driver writes this file (atomically) into the soak's data dir every progress tick and after
 * every fault; `--resume <dir>` reads it, brings the same private cluster back (same SQLite file, MinIO data
 * dir and ports) and drives the same campaign on. The time between two segments is a whole-cluster crash:
 * every process of the cluster was killed (a planned `--segment-minutes` end kills them with SIGKILL, an
 * unplanned end — the machine or session went away — leaves the file at its last tick).
 *
 * Pure apart from `readSoakState` / `writeSoakState`; unit-tested in test/bench-metrics/soak-state.test.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { TimeWindow } from './efficiency-metrics';

export const SOAK_STATE_FILE = 'soak-state.json';
export const SOAK_STATE_VERSION = 1;

const StatusAtSchema = z.object({ episodes: z.number(), trainSteps: z.number(), policyVersion: z.number() });

/** One injected fault as the report keeps it (bench/lib/soak-faults.ts SoakFaultOutcome). */
export const SoakFaultRecordSchema = z.object({
  index: z.number().int(),
  kind: z.string(),
  trigger: z.string(),
  triggered: z.boolean(),
  atMs: z.number(),
  downMs: z.number(),
  killedPid: z.number().optional(),
  restartedPid: z.number().optional(),
  detail: z.string().optional(),
  error: z.string().optional(),
  recoveredBy: z.string(),
  recoverMs: z.number().nullable(),
  /** The segment ended (the cluster went down) before the recovery was observed: not a failed recovery. */
  interruptedBySegmentEnd: z.boolean().optional(),
  statusAtFault: StatusAtSchema.nullable(),
});
export type SoakFaultRecord = z.infer<typeof SoakFaultRecordSchema>;

export const SoakSegmentSchema = z.object({
  /** ms epoch: the driver (re)started the cluster / the last tick that found the driver alive. */
  startedAt: z.number(),
  lastAliveAt: z.number(),
  /** How the segment ended: 'planned crash' (--segment-minutes), 'stopped' (the final one), or unset (unplanned). */
  endedBy: z.string().optional(),
  driverPid: z.number().int(),
  lastStatus: StatusAtSchema.nullable(),
});
export type SoakSegment = z.infer<typeof SoakSegmentSchema>;

export const SoakStateSchema = z.object({
  version: z.literal(SOAK_STATE_VERSION),
  campaignId: z.string().min(1),
  /** ms epoch of the first segment's start: fault times are relative to it. */
  startedAt: z.number(),
  /** The scenario's settings (episodes, trainSteps, faultEvery, seed, slots, …) as first given. */
  settings: z.record(z.string(), z.union([z.number(), z.string()])),
  args: z.array(z.string()),
  /** The private cluster: its data dir (SQLite, MinIO data, logs) and ports, reused on resume. */
  cluster: z.object({
    dataDir: z.string(),
    ports: z.object({
      temporal: z.number().int(),
      temporalUi: z.number().int(),
      minio: z.number().int(),
      minioConsole: z.number().int(),
      policyBase: z.number().int(),
    }),
    /** The orchestrator build serving now (a deploy changes it). */
    orchestratorBuild: z.string(),
    /** Policy servers killed for good: never started again. */
    retiredPolicyServers: z.array(z.string()),
  }),
  deploy: z.object({ fromRev: z.string(), toRev: z.string(), changedWorkflowFiles: z.array(z.string()) }),
  faults: z.array(SoakFaultRecordSchema),
  segments: z.array(SoakSegmentSchema).min(1),
});
export type SoakState = z.infer<typeof SoakStateSchema>;

export function soakStatePath(dir: string): string {
  return path.join(dir, SOAK_STATE_FILE);
}

/** Reads and validates the state file; the error names the file, the field and what to do. */
export function readSoakState(dir: string): SoakState {
  const file = soakStatePath(dir);
  if (!fs.existsSync(file))
    throw new Error(`--resume ${dir}: no ${SOAK_STATE_FILE} there; pass the --state-dir of the soak to resume`);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file} is not JSON (${String(err)}); the soak cannot be resumed from it`);
  }
  const parsed = SoakStateSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `${file}: field "${issue?.path.join('.') ?? '?'}": ${issue?.message ?? 'invalid'} — written by another version of bench/soak.ts? Start a new soak with another --state-dir`
    );
  }
  return parsed.data;
}

/** Write-then-rename, so a crash mid-write leaves the previous state, never half a file. */
export function writeSoakState(dir: string, state: SoakState): void {
  const file = soakStatePath(dir);
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(SoakStateSchema.parse(state), null, 2)}\n`);
  fs.renameSync(tmp, file);
}

/**
 * Faults whose recovery was not observed when their segment ended are marked interrupted (the whole cluster
 * went down before the campaign could show progress), so the report does not count them as unrecovered.
 */
export function closeSegment(state: SoakState, endedBy: string | undefined): SoakState {
  const segments = [...state.segments];
  const last = segments[segments.length - 1]!;
  segments[segments.length - 1] = { ...last, ...(endedBy ? { endedBy } : {}) };
  return {
    ...state,
    segments,
    faults: state.faults.map((f) => (f.recoverMs === null && !f.error ? { ...f, interruptedBySegmentEnd: true } : f)),
  };
}

/** The windows the cluster was up: one per segment, from its start (the first: the first lease) to its last tick. */
export function segmentWindows(
  segments: readonly SoakSegment[],
  firstLeaseAt: number | null,
  end: number
): TimeWindow[] {
  return segments.map((s, i) => {
    const start = i === 0 && firstLeaseAt !== null ? Math.max(s.startedAt, firstLeaseAt) : s.startedAt;
    const last = i === segments.length - 1 ? end : s.lastAliveAt;
    return { start, end: Math.max(start, last) };
  });
}

/**
 * Is the process that wrote a segment still running a soak? (A resume must not fight a live driver for its
 * ports.) A PID reused by an unrelated process since does not count.
 */
export function driverAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('soak');
  } catch {
    return true; // no /proc: assume the worst
  }
}
