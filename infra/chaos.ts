/**
 * Chaos harness shared by test/chaos/chaos.test.ts and `npm run bench -- chaos`: a private Temporal dev
 * server (own SQLite file, free ports) and a private MinIO (own data dir, free port) with dartflow's four
 * roles as child processes, and real faults — kill -9 by PID (checked gone) followed by a restart: of
 * an env worker, the policy server, the trainer, the orchestrator worker, the dev server (same SQLite
 * file) and MinIO (same data dir). Never touches the shared servers of `npm run infra:up`.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { createPrng, shuffled } from '../algorithms/prng';
import { readLineage } from '../cli/lineage';
import {
  startLocalWorkers,
  type LocalChild,
  type LocalWorkers,
  type LocalWorkersOptions,
  type Role,
} from '../cli/local-workers';
import type { GroupSummary } from '../schemas/campaign';
import { StepRecordSchema, TrajectoryManifestSchema, type TrajectoryManifest } from '../schemas/records';
import { keys } from '../storage/keys';
import { ObjectStore } from '../storage/object-store';
import { DartflowClient } from '../client/dartflow-client';
import type { CampaignStatus } from '../schemas/campaign';
import type { CampaignConfigInput } from '../schemas/config';
import type { CampaignResult } from '../workflows/campaign';
import {
  auditCampaign,
  type AuditInput,
  type AuditReport,
  type GroupEvidence,
  type ManifestEvidence,
} from './chaos-audit';
import { minioHealthy, startMinio, startTemporalDevServer, temporalHealthy } from './services';
import { loadInfraSettings, type InfraSettings } from './settings';
import { freePort } from './ports';
import { connectClient } from './temporal-connection';
import { ORCHESTRATOR_DEPLOYMENT } from '../workers/orchestrator-worker';

export const FAULT_KINDS = ['env', 'policy', 'trainer', 'orchestrator', 'temporal', 'minio'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface PlannedFault {
  kind: FaultKind;
  /** How long the victim stays down before it is restarted (ms). */
  downMs: number;
}

/**
 * A seeded fault schedule: `rounds` rounds, each a random order of every fault kind (so each kind is
 * injected once per round), each with a down time drawn from [minDownMs, maxDownMs]. Pure.
 */
export function chaosSchedule(
  seed: number,
  rounds: number,
  downMs: { min: number; max: number } = { min: 500, max: 3000 }
): PlannedFault[] {
  const rng = createPrng(`chaos/${seed}`);
  const out: PlannedFault[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const kind of shuffled(FAULT_KINDS, rng)) {
      out.push({ kind, downMs: downMs.min + rng.nextInt(Math.max(1, downMs.max - downMs.min + 1)) });
    }
  }
  return out;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value (errors count as "not yet"); throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs: number,
  intervalMs = 250,
  signal?: AbortSignal
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    if (signal?.aborted) throw new Error(`gave up waiting for ${what}: the run is over`);
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${Math.round(timeoutMs / 1000)}s waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`
      );
    await sleep(intervalMs);
  }
}

/** True while a process with this PID exists and is not a zombie. */
export function pidAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // field 3 (after the parenthesised command) is the state; Z = zombie (dead, not yet reaped)
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** kill -9 one PID (or its whole process group) and wait until it is really gone. */
export async function killNine(pid: number, opts: { group?: boolean; timeoutMs?: number } = {}): Promise<void> {
  try {
    process.kill(opts.group ? -pid : pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
  await waitFor(`PID ${pid} to die after SIGKILL`, () => !pidAlive(pid), opts.timeoutMs ?? 15_000, 50);
}

export interface ChaosClusterOptions {
  envKind?: 'browser' | 'simulated';
  simulatedProfile?: string;
  envSlots?: number;
  /** Simulated env latency multiplier and bernoulli success probability (soak: compressed time, fast groups). */
  simulatedTimeScale?: number;
  simulatedBernoulliReward?: number;
  /** Policy servers p0…p(n−1) (default 1); the soak kills one for good and keeps the other. */
  policyServers?: number;
  /**
   * Run the orchestrator under Worker Versioning with this build id (DARTFLOW_BUILD_ID), made current at
   * start, so `deployOrchestrator` can cut over to a new build as docs/upgrades.md describes. Unset: an
   * unversioned orchestrator, as before.
   */
  orchestratorBuildId?: string;
  /**
   * The checkout the first orchestrator build runs from (default this one): an export of an older commit,
   * so a later `deployOrchestrator` is a deploy of changed code, not only of a new build id.
   */
  orchestratorProjectRoot?: string;
  /** Keep the private data dir (logs, SQLite, MinIO data) after stop, for debugging. */
  keepData?: boolean;
  /**
   * Use this data dir (created when missing, never removed by `stop`) instead of a fresh temporary one: a
   * cluster brought back over the same SQLite file and MinIO data (bench/soak.ts --resume).
   */
  dataDir?: string;
  /** Listen on these ports (a resumed cluster: the ones its roles and stored settings know) instead of free ones. */
  ports?: ChaosPorts;
  /** Policy servers (e.g. `p1`) not to start: lost for good before the cluster was brought back. */
  skipPolicyServers?: string[];
  /** Echo the roles' output to this process's stdout. */
  echo?: boolean;
}

export interface ChaosPorts {
  temporal: number;
  temporalUi: number;
  minio: number;
  minioConsole: number;
  /** Policy server i listens on policyBase + i. */
  policyBase: number;
}

const ROLE_OF: Record<'env' | 'policy' | 'trainer' | 'orchestrator', Role> = {
  env: 'env',
  policy: 'policy',
  trainer: 'trainer',
  orchestrator: 'orchestrator',
};

const running = (c: LocalChild): boolean => c.process.exitCode === null && c.process.signalCode === null;

/** A port p with p … p+n−1 all free a moment ago (policy servers listen on consecutive ports). */
async function freePortRange(n: number): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
  for (let attempt = 0; ; attempt++) {
    const base = await freePort();
    let ok = true;
    for (let i = 1; i < n && ok; i++) ok = await free(base + i);
    if (ok || attempt >= 20) return base;
  }
}

/**
 * A private deployment: dev server + MinIO + one process per role (n policy servers), all started here and
 * stopped by PID. `settings` point at the private servers (pass them to DartflowClient.connect /
 * ObjectStore.fromSettings).
 */
export class ChaosCluster {
  private temporalPid: number | undefined;
  private minioPid: number | undefined;
  /** Live groups of role processes: the roles, plus the current orchestrator build when versioned. */
  private handles: LocalWorkers[] = [];
  /** The orchestrator's own group when versioned (a deploy replaces it). */
  private orchestratorHandle: LocalWorkers | undefined;
  /** Processes stopped on purpose (an old build after a deploy, a server killed for good): not crashes. */
  private readonly retired = new Set<LocalChild>();
  /** Which child each role's last kill hit, so the restart brings that one back. */
  private readonly lastKilled = new Map<FaultKind, string>();
  private constructor(
    readonly settings: InfraSettings,
    readonly dataDir: string,
    readonly dbFile: string,
    private readonly opts: ChaosClusterOptions,
    private readonly workerOpts: LocalWorkersOptions,
    /** The ports this cluster listens on (a resumed cluster must get the same ones). */
    readonly ports: ChaosPorts
  ) {}

  /** The role processes (first group); see `children` for every live one. */
  get workers(): LocalWorkers {
    const h = this.handles[0];
    if (!h) throw new Error('chaos cluster: workers not started');
    return h;
  }

  /** Every role process started and not retired (a restarted role appears once, as its newest process). */
  get children(): LocalChild[] {
    return this.handles.flatMap((h) => h.children).filter((c) => !this.retired.has(c));
  }

  /** The orchestrator build currently serving (undefined when unversioned). */
  orchestratorBuild: string | undefined;

  static async start(opts: ChaosClusterOptions = {}): Promise<ChaosCluster> {
    const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-chaos-'));
    fs.mkdirSync(dataDir, { recursive: true });
    const policyServers = opts.policyServers ?? 1;
    const ports: ChaosPorts = opts.ports ?? {
      temporal: await freePort(),
      temporalUi: await freePort(),
      minio: await freePort(),
      minioConsole: await freePort(),
      policyBase: await freePortRange(policyServers),
    };
    const { temporal: tPort, temporalUi: tUi, minio: mPort, minioConsole: mConsole, policyBase: policyPort } = ports;
    const env: NodeJS.ProcessEnv = {
      DARTFLOW_DATA_DIR: dataDir,
      DARTFLOW_TEMPORAL_PORT: String(tPort),
      DARTFLOW_TEMPORAL_UI_PORT: String(tUi),
      DARTFLOW_MINIO_PORT: String(mPort),
      DARTFLOW_MINIO_CONSOLE_PORT: String(mConsole),
      TEMPORAL_NAMESPACE: 'default',
      S3_BUCKET: 'dartflow',
      // never an external cluster: everything here is private
      TEMPORAL_ADDRESS: undefined,
      S3_ENDPOINT: undefined,
      // a build id inherited from the caller's shell must not version the roles by accident
      DARTFLOW_BUILD_ID: undefined,
    };
    const settings = loadInfraSettings({ ...process.env, ...env });
    const dbFile = path.join(dataDir, 'temporal', 'chaos.sqlite');
    const workerOpts: LocalWorkersOptions = {
      envWorkers: 1,
      envSlots: opts.envSlots ?? 4,
      envKind: opts.envKind ?? 'simulated',
      ...(opts.simulatedProfile ? { simulatedProfile: opts.simulatedProfile } : {}),
      ...(opts.simulatedTimeScale !== undefined ? { simulatedTimeScale: opts.simulatedTimeScale } : {}),
      ...(opts.simulatedBernoulliReward !== undefined
        ? { simulatedBernoulliReward: opts.simulatedBernoulliReward }
        : {}),
      policyServers,
      policyBasePort: policyPort,
      ...(opts.skipPolicyServers?.length ? { skipPolicyServers: opts.skipPolicyServers } : {}),
      env,
      ...(opts.echo ? { echo: true } : {}),
    };
    const cluster = new ChaosCluster(settings, dataDir, dbFile, opts, workerOpts, ports);
    try {
      await cluster.startMinio();
      await cluster.startTemporal();
      if (!opts.orchestratorBuildId) cluster.handles.push(startLocalWorkers(settings, workerOpts));
      else {
        cluster.handles.push(startLocalWorkers(settings, { ...workerOpts, roles: ['policy', 'trainer', 'env'] }));
        cluster.orchestratorHandle = cluster.startOrchestratorBuild(
          opts.orchestratorBuildId,
          opts.orchestratorProjectRoot
        );
        // The first versioned build must be made current too, or it receives no tasks (docs/upgrades.md).
        await cluster.makeOrchestratorBuildCurrent(opts.orchestratorBuildId);
      }
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  get logDir(): string {
    return path.join(this.dataDir, 'logs');
  }

  private startOrchestratorBuild(buildId: string, projectRoot?: string): LocalWorkers {
    const h = startLocalWorkers(this.settings, {
      ...this.workerOpts,
      ...(projectRoot ? { projectRoot } : {}),
      roles: ['orchestrator'],
      env: { ...this.workerOpts.env, DARTFLOW_BUILD_ID: buildId },
      logDir: path.join(this.logDir, `orchestrator-${buildId}`),
    });
    this.handles.push(h);
    return h;
  }

  /** set-current-version through the client; retried until the build's worker has polled (the version exists). */
  private async makeOrchestratorBuildCurrent(buildId: string): Promise<void> {
    const client = await waitFor('a client of the private dev server', () => connectClient(this.settings), 60_000);
    try {
      await waitFor(
        `orchestrator build ${buildId} to become the current version`,
        async () => {
          await client.workflowService.setWorkerDeploymentCurrentVersion({
            namespace: this.settings.temporal.namespace,
            deploymentName: ORCHESTRATOR_DEPLOYMENT,
            buildId,
            identity: 'dartflow-chaos',
          });
          return true;
        },
        180_000,
        500
      );
      this.orchestratorBuild = buildId;
    } finally {
      await client.connection.close().catch(() => undefined);
    }
  }

  /**
   * A deploy of the orchestrator under Worker Versioning (docs/upgrades.md "Alternative: Worker Versioning"):
   * start the new build next to the old one, make it current, then stop the old workers with SIGTERM (their
   * in-flight activities finish). Returns the PIDs and how long the cut-over took. `projectRoot`: the
   * checkout the new build runs from (default this one).
   */
  async deployOrchestrator(
    buildId: string,
    projectRoot?: string
  ): Promise<{ oldPid: number; newPid: number; cutOverMs: number }> {
    const old = this.orchestratorHandle;
    if (!old) throw new Error('deployOrchestrator needs a versioned orchestrator (orchestratorBuildId)');
    const oldPid = this.pidOf('orchestrator') ?? -1;
    const t0 = Date.now();
    const next = this.startOrchestratorBuild(buildId, projectRoot);
    await this.makeOrchestratorBuildCurrent(buildId);
    const cutOverMs = Date.now() - t0;
    await old.stop(30_000);
    for (const c of old.children) this.retired.add(c);
    this.handles = this.handles.filter((h) => h !== old);
    this.orchestratorHandle = next;
    return { oldPid, newPid: next.children[0]?.process.pid ?? -1, cutOverMs };
  }

  private childOf(kind: 'env' | 'policy' | 'trainer' | 'orchestrator', name?: string): LocalChild | undefined {
    const of = this.children.filter((c) => c.role === ROLE_OF[kind]);
    if (name) return of.find((c) => c.name === name);
    return of.find(running) ?? of[0];
  }

  /** The PID currently serving a role (the first running process of it: one env worker, trainer, orchestrator). */
  pidOf(kind: FaultKind): number | undefined {
    if (kind === 'temporal') return this.temporalPid;
    if (kind === 'minio') return this.minioPid;
    return this.childOf(kind)?.process.pid;
  }

  /**
   * kill -9 the victim by PID and wait until the process is gone; returns the PID killed. `name` picks one
   * process of a role with several (e.g. `policy-p1`); default: the first running one.
   */
  async kill(kind: FaultKind, name?: string): Promise<number> {
    if (kind === 'temporal' || kind === 'minio') {
      const pid = kind === 'temporal' ? this.temporalPid : this.minioPid;
      if (pid === undefined) throw new Error(`no ${kind} PID recorded`);
      await killNine(pid, { group: true }); // detached daemons lead their own process group
      if (kind === 'temporal') {
        this.temporalPid = undefined;
        await waitFor(
          'the dev server port to close',
          async () => !(await temporalHealthy(this.settings.temporal.address, 500)),
          15_000
        );
      } else {
        this.minioPid = undefined;
        await waitFor(
          'MinIO to stop answering',
          async () => !(await minioHealthy(this.settings.s3.endpoint, 500)),
          15_000
        );
      }
      return pid;
    }
    const child = this.childOf(kind, name);
    if (!child?.process.pid || !running(child)) throw new Error(`no running ${name ?? kind} process`);
    const pid = child.process.pid;
    const exited = new Promise<void>((resolve) => {
      if (!running(child)) resolve();
      else child.process.once('exit', () => resolve());
    });
    await killNine(pid);
    await exited;
    if (child.process.signalCode !== 'SIGKILL')
      throw new Error(
        `${child.name} (PID ${pid}) exited with ${String(child.process.signalCode ?? child.process.exitCode)}, not by SIGKILL`
      );
    this.lastKilled.set(kind, child.name);
    return pid;
  }

  /** kill -9 one process of a role and never bring it back (e.g. a policy server lost for good). */
  async killForGood(kind: 'env' | 'policy' | 'trainer' | 'orchestrator', name?: string): Promise<number> {
    const child = this.childOf(kind, name);
    const pid = await this.kill(kind, name);
    if (child) this.retired.add(child);
    this.lastKilled.delete(kind);
    return pid;
  }

  /** Brings the victim back (same ports, same SQLite file, same MinIO data dir); resolves when it is up. */
  async restart(kind: FaultKind): Promise<number> {
    if (kind === 'temporal') return this.startTemporal();
    if (kind === 'minio') return this.startMinio();
    const child = this.childOf(kind, this.lastKilled.get(kind));
    if (!child) throw new Error(`no ${kind} process known`);
    const handle = this.handles.find((h) => h.children.includes(child));
    if (!handle) throw new Error(`${child.name} belongs to no live group`);
    const c = handle.restart(child.name);
    if (!c.process.pid) throw new Error(`${child.name} did not start`);
    return c.process.pid;
  }

  /** True when the named role's process is running (not exited). */
  roleRunning(kind: 'env' | 'policy' | 'trainer' | 'orchestrator'): boolean {
    const c = this.childOf(kind);
    return Boolean(c && running(c));
  }

  /** Roles that died on their own (not by our SIGKILL, not retired on purpose): a crash under chaos is a finding. */
  unexpectedExits(): string[] {
    return this.children
      .filter((c) => c.process.exitCode !== null && c.process.signalCode !== 'SIGKILL')
      .map((c) => `${c.name} exited with code ${String(c.process.exitCode)}`);
  }

  private async startTemporal(): Promise<number> {
    const h = await startTemporalDevServer(this.settings, {
      port: this.settings.temporal.port,
      uiPort: this.settings.temporal.uiPort,
      dbFile: this.dbFile,
      namespace: 'default',
      instanceName: 'chaos-temporal',
    });
    if (h.pid === undefined) throw new Error('dev server started without a PID');
    this.temporalPid = h.pid;
    return h.pid;
  }

  private async startMinio(): Promise<number> {
    const h = await startMinio(this.settings);
    if (h.pid === undefined) throw new Error('MinIO started without a PID');
    this.minioPid = h.pid;
    return h.pid;
  }

  private async stopServers(): Promise<void> {
    for (const pid of [this.temporalPid, this.minioPid])
      if (pid !== undefined) await killNine(pid, { group: true }).catch(() => undefined);
    this.temporalPid = undefined;
    this.minioPid = undefined;
  }

  /**
   * A whole-cluster crash: kill -9 of every role process and both servers, nothing stopped gracefully, the
   * data dir kept — what a power loss leaves behind. `ChaosCluster.start` with the same `dataDir` and
   * `ports` brings it back.
   */
  async crash(): Promise<void> {
    for (const c of this.children)
      if (c.process.pid && running(c)) await killNine(c.process.pid).catch(() => undefined);
    await this.stopServers();
  }

  /** Stops every process this cluster started (by PID) and removes the private data dir (unless kept or given). */
  async stop(): Promise<void> {
    for (const h of this.handles) await h.stop().catch(() => undefined);
    await this.stopServers();
    if (!this.opts.keepData && !this.opts.dataDir) fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

// ---- evidence for the audit (infra/chaos-audit.ts) ----------------------------------------------------

export interface HistoryStats {
  workflows: number;
  /** Σ (attempt − 1) over completed/failed activities, by activity type: retries the server recorded. */
  activityRetries: Record<string, number>;
  activityTimeouts: number;
  activityFailures: number;
  workflowTaskTimeouts: number;
  workflowTaskFailures: number;
  /** WorkflowTaskFailed events whose cause is non-determinism (a replay that did not match its history). */
  nondeterminismErrors: number;
  /** Completed workflow tasks by the Worker Versioning build that ran them ('unversioned' without one). */
  workflowTasksByBuild: Record<string, number>;
  /** Episodes a batched runEpisodes activity reported as failed (each retried on its own). */
  failedEpisodeOutcomes: number;
  /** Train-step children that ended with a failed step (their data was discarded as train-step-failed). */
  failedTrainSteps: number;
  /** The first few of their errors, so a soak report says why training stalled. */
  trainStepErrors: string[];
}

export function emptyHistoryStats(): HistoryStats {
  return {
    workflows: 0,
    activityRetries: {},
    activityTimeouts: 0,
    activityFailures: 0,
    workflowTaskTimeouts: 0,
    workflowTaskFailures: 0,
    nondeterminismErrors: 0,
    workflowTasksByBuild: {},
    failedEpisodeOutcomes: 0,
    failedTrainSteps: 0,
    trainStepErrors: [],
  };
}

/** How many train-step errors a report keeps verbatim. */
const TRAIN_STEP_ERRORS_KEPT = 10;

/** A trainStepWorkflow's outcome (workflows/train-step.ts) from its completion event, counted when it failed. */
export function countTrainStepOutcome(events: HistoryEvent[], stats: HistoryStats): void {
  const done = events.find((e) => e.eventType === ET.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED);
  const outcome = decode(done?.workflowExecutionCompletedEventAttributes?.result) as
    { ok?: boolean; trainStep?: number; error?: string } | undefined;
  if (!outcome || outcome.ok !== false) return;
  stats.failedTrainSteps++;
  if (stats.trainStepErrors.length < TRAIN_STEP_ERRORS_KEPT)
    stats.trainStepErrors.push(`step ${String(outcome.trainStep)}: ${String(outcome.error).slice(0, 300)}`);
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const ET = temporal.api.enums.v1.EventType;

/**
 * A WorkflowTaskFailed event caused by non-determinism: the server-side cause, or — as the TypeScript SDK
 * reports a DeterminismViolationError — the `[TMPRL1100]` code / "Nondeterminism" in the failure message.
 */
export function isNondeterminismFailure(e: HistoryEvent): boolean {
  if (e.eventType !== ET.EVENT_TYPE_WORKFLOW_TASK_FAILED) return false;
  const a = e.workflowTaskFailedEventAttributes;
  if (a?.cause === temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR)
    return true;
  const message = `${a?.failure?.message ?? ''} ${a?.failure?.applicationFailureInfo?.type ?? ''}`;
  return /TMPRL1100|nondetermin|DeterminismViolation/i.test(message);
}

/** The build that ran a completed workflow task (Worker Versioning), or 'unversioned'. */
export function workflowTaskBuild(e: HistoryEvent): string | undefined {
  if (e.eventType !== ET.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) return undefined;
  const a = e.workflowTaskCompletedEventAttributes;
  return a?.deploymentVersion?.buildId || a?.workerVersion?.buildId || 'unversioned';
}

function decode(payloads: temporal.api.common.v1.IPayloads | null | undefined): unknown {
  const p = payloads?.payloads?.[0];
  return p ? defaultPayloadConverter.fromPayload(p as Payload) : undefined;
}

interface EpisodeResultLike {
  trajectoryId?: string;
  status?: string;
  reward?: number | null;
}

/** One task group's evidence from its history (episode activity results and failures, its summary). */
export function groupEvidenceFromHistory(groupId: string, events: HistoryEvent[], stats: HistoryStats): GroupEvidence {
  const scheduled = new Map<string, { type: string; input: unknown }>();
  const evidence: GroupEvidence = { groupId, completedOk: {}, failedAttempts: [] };
  const failed = new Set<string>();
  for (const e of events) {
    const id = String(e.eventId);
    switch (e.eventType) {
      case ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: {
        const a = e.activityTaskScheduledEventAttributes!;
        scheduled.set(id, { type: a.activityType?.name ?? '?', input: decode(a.input) });
        break;
      }
      case ET.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
        const a = e.activityTaskCompletedEventAttributes!;
        const s = scheduled.get(String(a.scheduledEventId));
        const result = decode(a.result);
        if (s?.type === 'runEpisode') {
          const r = result as EpisodeResultLike;
          if (r.trajectoryId && r.status === 'ok' && typeof r.reward === 'number')
            evidence.completedOk[r.trajectoryId] = r.reward;
        } else if (s?.type === 'runEpisodes') {
          for (const o of (result as Array<{ ok: boolean; result?: EpisodeResultLike; trajectoryId?: string }>) ?? []) {
            if (o.ok && o.result?.trajectoryId && o.result.status === 'ok' && typeof o.result.reward === 'number')
              evidence.completedOk[o.result.trajectoryId] = o.result.reward;
            else if (!o.ok && o.trajectoryId) {
              failed.add(o.trajectoryId);
              stats.failedEpisodeOutcomes++;
            }
          }
        }
        break;
      }
      case ET.EVENT_TYPE_ACTIVITY_TASK_FAILED:
      case ET.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: {
        const a = e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes;
        const s = scheduled.get(String(a?.scheduledEventId));
        const input = s?.input as { trajectoryId?: string; episodes?: Array<{ trajectoryId?: string }> } | undefined;
        if (input?.trajectoryId) failed.add(input.trajectoryId);
        for (const ep of input?.episodes ?? []) if (ep.trajectoryId) failed.add(ep.trajectoryId);
        break;
      }
      // The group's summary: the groupFinished signal it sent the campaign, or its result (a group that
      // reported by signal returns only a small ack).
      case ET.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
      case ET.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: {
        const signal = e.signalExternalWorkflowExecutionInitiatedEventAttributes;
        if (signal && signal.signalName !== 'groupFinished') break;
        const g = decode(signal ? signal.input : e.workflowExecutionCompletedEventAttributes?.result) as
          GroupSummary | undefined;
        if (g?.trajectories)
          evidence.summary = {
            trajectories: g.trajectories.map((t) => ({
              trajectoryId: t.trajectoryId,
              reward: t.reward,
              injectedFromPool: t.injectedFromPool,
            })),
            lostTrajectoryIds: g.lostTrajectoryIds ?? [],
            infraFailures: g.infraFailures,
          };
        break;
      }
    }
  }
  evidence.failedAttempts = [...failed];
  return evidence;
}

function countHistory(events: HistoryEvent[], stats: HistoryStats): void {
  const scheduled = new Map<string, string>();
  for (const e of events) {
    switch (e.eventType) {
      case ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        scheduled.set(String(e.eventId), e.activityTaskScheduledEventAttributes?.activityType?.name ?? '?');
        break;
      case ET.EVENT_TYPE_ACTIVITY_TASK_STARTED: {
        const a = e.activityTaskStartedEventAttributes!;
        const retries = (a.attempt ?? 1) - 1;
        if (retries > 0) {
          const type = scheduled.get(String(a.scheduledEventId)) ?? '?';
          stats.activityRetries[type] = (stats.activityRetries[type] ?? 0) + retries;
        }
        break;
      }
      case ET.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        stats.activityTimeouts++;
        break;
      case ET.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        stats.activityFailures++;
        break;
      case ET.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
        stats.workflowTaskTimeouts++;
        break;
      case ET.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        stats.workflowTaskFailures++;
        if (isNondeterminismFailure(e)) stats.nondeterminismErrors++;
        break;
      case ET.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: {
        const build = workflowTaskBuild(e) ?? 'unversioned';
        stats.workflowTasksByBuild[build] = (stats.workflowTasksByBuild[build] ?? 0) + 1;
        break;
      }
    }
  }
}

/** Steps of an ok rollout trajectory: as many as the manifest says, each answered by a policy server. */
async function stepIssue(store: ObjectStore, m: TrajectoryManifest): Promise<string | null> {
  try {
    const steps = await store.getJsonLines(m.stepsKey, StepRecordSchema, m.stepsSha256);
    if (steps.length !== m.numSteps) return `${steps.length} step records for numSteps ${m.numSteps}`;
    if (steps.some((s, i) => s.step !== i)) return 'step records are not 0..n-1';
    if (m.source === 'rollout' && steps.some((s) => !s.policyServer))
      return 'a step without a policy server answer (a failed act recorded as a step)';
    return null;
  } catch (err) {
    return `steps unreadable: ${String(err)}`;
  }
}

/** Runs `fn` over items with at most `limit` in flight (a soak's audit reads ~10⁵ objects and 10⁴ histories). */
async function forEachLimit<T>(items: AsyncIterable<T> | Iterable<T>, limit: number, fn: (t: T) => Promise<void>) {
  const inFlight = new Set<Promise<void>>();
  for await (const item of items) {
    const p: Promise<void> = fn(item).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= limit) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

export interface CollectAuditOptions {
  /** Sees every manifest read (e.g. the soak keeps its timing for utilization), so nothing is read twice. */
  onManifest?: (m: TrajectoryManifest, scope: 'campaign' | 'eval') => void;
  /** Sees every workflow run's history (e.g. history sizes for bench/lib/history-stats.ts). */
  onHistory?: (wf: WorkflowExecutionInfo, history: temporal.api.history.v1.IHistory) => void;
  /** Objects / histories read at once (default 16 / 8). */
  concurrency?: { objects?: number; histories?: number };
  onProgress?: (what: string, n: number) => void;
}

/**
 * Everything the audit needs: manifests (campaign and .eval prefixes), ledger, checkpoints, discard
 * records from MinIO, and every workflow history of the (private) namespace from Temporal.
 */
export async function collectAuditEvidence(
  store: ObjectStore,
  client: Client,
  campaignId: string,
  opts: CollectAuditOptions = {}
): Promise<{ input: AuditInput; history: HistoryStats }> {
  const manifests: ManifestEvidence[] = [];
  for (const [scope, prefix] of [
    ['campaign', keys.trajectoryPrefix(campaignId)],
    ['eval', keys.trajectoryPrefix(`${campaignId}.eval`)],
  ] as const) {
    const found = (await store.list(prefix)).filter((k) => k.endsWith('/manifest.json'));
    await forEachLimit(found, opts.concurrency?.objects ?? 16, async (key) => {
      const m = await store.getJson(key, TrajectoryManifestSchema);
      opts.onManifest?.(m, scope);
      manifests.push({
        trajectoryId: m.trajectoryId,
        groupId: m.groupId,
        scope,
        status: m.status,
        reward: m.reward,
        source: m.source,
        numSteps: m.numSteps,
        stepIssue: m.status === 'ok' && scope === 'campaign' ? await stepIssue(store, m) : null,
        minPolicyVersion: m.minPolicyVersion,
        maxPolicyVersion: m.maxPolicyVersion,
      });
      if (manifests.length % 5000 === 0) opts.onProgress?.('manifests', manifests.length);
    });
  }
  const lineage = await readLineage(store, campaignId);
  const history = emptyHistoryStats();
  const groups: GroupEvidence[] = [];
  await forEachLimit(client.workflow.list(), opts.concurrency?.histories ?? 8, async (wf) => {
    const h = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    const events = h.events ?? [];
    history.workflows++;
    countHistory(events, history);
    opts.onHistory?.(wf, h);
    if (wf.type === 'taskGroupWorkflow') groups.push(groupEvidenceFromHistory(wf.workflowId, events, history));
    if (wf.type === 'trainStepWorkflow') countTrainStepOutcome(events, history);
    if (history.workflows % 1000 === 0) opts.onProgress?.('histories', history.workflows);
  });
  return {
    input: {
      manifests,
      ledger: lineage.ledger.map((e) => ({
        trainStep: e.trainStep,
        fromVersion: e.fromVersion,
        toVersion: e.toVersion,
        consumed: e.consumed.map((c) => ({
          trajectoryId: c.trajectoryId,
          groupId: c.groupId,
          reward: c.reward,
          injectedFromPool: c.injectedFromPool,
        })),
        ...(e.skipped?.length ? { skipped: e.skipped.map((k) => ({ groupId: k.groupId, reason: k.reason })) } : {}),
      })),
      checkpoints: lineage.checkpoints.map((c) => ({ version: c.version, parentVersion: c.parentVersion })),
      discards: lineage.discards.map((d) => ({ groupId: d.groupId, event: d.event, trajectories: d.trajectories })),
      groups,
    },
    history,
  };
}

// ---- a campaign under a fault schedule --------------------------------------------------------------

export interface ChaosRunOptions {
  seed: number;
  rounds: number;
  campaignId?: string;
  envKind?: 'browser' | 'simulated';
  simulatedProfile?: string;
  envSlots?: number;
  downMs?: { min: number; max: number };
  /** Wait for the campaign to make progress after each fault before the next one (true: the benchmark). */
  serial?: boolean;
  /** How long to wait for a fault's trigger (e.g. a train step in flight) before injecting anyway. */
  triggerTimeoutMs?: number;
  /** How long the campaign may take to make progress after a fault. */
  recoveryTimeoutMs?: number;
  /** Campaign config overrides (a small quickstart-like campaign by default). */
  campaign?: CampaignConfigInput;
  keepData?: boolean;
  log?: (line: string) => void;
}

export interface FaultOutcome {
  index: number;
  kind: FaultKind;
  /** The condition the fault waited for, and whether it held when the fault was injected. */
  trigger: string;
  triggered: boolean;
  /** ms since the campaign started. */
  atMs: number;
  killedPid: number;
  downMs: number;
  restartedPid: number;
  /** kill → the victim is back (process spawned; servers healthy). */
  restartMs: number;
  /** What counted as recovery (e.g. "episodes > 96"), and kill → that progress, when observed. */
  recoveredBy: string;
  recoverMs: number | null;
  statusAtKill: { episodes: number; trainSteps: number; policyVersion: number } | null;
}

export interface ChaosRunReport {
  seed: number;
  rounds: number;
  campaignId: string;
  schedule: PlannedFault[];
  faults: FaultOutcome[];
  faultsByKind: Record<string, number>;
  campaign: {
    completed: boolean;
    error?: string;
    result?: CampaignResult;
  };
  audit: AuditReport;
  history: HistoryStats;
  unexpectedExits: string[];
  wallMs: number;
}

/** Triggers: hit the trainer mid-step, env/policy/MinIO mid-episode; the rest at any moment. */
export function triggerFor(kind: FaultKind): { what: string; holds: (s: CampaignStatus) => boolean } {
  if (kind === 'trainer') return { what: 'a train step in flight', holds: (s) => s.trainInFlight };
  if (kind === 'env' || kind === 'policy' || kind === 'minio')
    return { what: 'episodes in flight', holds: (s) => s.episodesInFlight > 0 };
  return { what: 'campaign running', holds: (s) => s.phase === 'running' };
}

/** A small quickstart-like campaign: no warm start, tiny groups and steps, stopped by the harness. */
export function chaosCampaignConfig(campaignId: string, overrides: CampaignConfigInput = {}): CampaignConfigInput {
  return {
    ...overrides,
    campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 10_000, ...overrides.campaign },
    rollout: { envConcurrency: 8, maxSteps: 4, nMax: 4, ...overrides.rollout },
    policy: { bcWarmStartEpisodes: 0, ...overrides.policy },
    trainer: { learningRate: 3e-3, klBeta: 0, minGroups: 1, maxGroups: 8, epochs: 1, ...overrides.trainer },
    eval: { everyVersions: 1000, episodesPerTask: 4, gateEveryVersions: 0, ...overrides.eval },
  };
}

/**
 * Runs a campaign on a private cluster while injecting the seeded fault schedule, stops it, and audits
 * its ledger, checkpoints, manifests and Temporal histories. Cleans up every process and the data dir.
 */
export async function runChaosCampaign(opts: ChaosRunOptions): Promise<ChaosRunReport> {
  const log = opts.log ?? (() => undefined);
  const schedule = chaosSchedule(opts.seed, opts.rounds, opts.downMs);
  const campaignId = opts.campaignId ?? `chaos-${opts.seed}`;
  const triggerTimeout = opts.triggerTimeoutMs ?? 45_000;
  const recoveryTimeout = opts.recoveryTimeoutMs ?? 240_000;
  const cluster = await ChaosCluster.start({
    envKind: opts.envKind ?? 'simulated',
    simulatedProfile: opts.simulatedProfile ?? 'browser',
    envSlots: opts.envSlots ?? 4,
    ...(opts.keepData ? { keepData: true } : {}),
  });
  const started = Date.now();
  const since = () => Date.now() - started;
  let client: DartflowClient | undefined;
  // Ends the background recovery watchers before the client closes (no call may be left in flight).
  const over = new AbortController();
  const recoveries: Promise<void>[] = [];
  try {
    client = await DartflowClient.connect(cluster.settings);
    const campaign = await client.startCampaign(chaosCampaignConfig(campaignId, opts.campaign));
    log(
      `campaign ${campaignId} started; private Temporal ${cluster.settings.temporal.address}, MinIO ${cluster.settings.s3.endpoint}`
    );
    let last: CampaignStatus | null = null;
    const status = async () => (last = await campaign.status());
    await waitFor('the first train step', async () => (await status()).trainSteps >= 1, recoveryTimeout);

    const faults: FaultOutcome[] = [];
    for (const [index, planned] of schedule.entries()) {
      const trig = triggerFor(planned.kind);
      const triggered = await waitFor(trig.what, async () => trig.holds(await status()), triggerTimeout, 100).then(
        () => true,
        () => false
      );
      const atKill = last as CampaignStatus | null;
      const atMs = since();
      const killedPid = await cluster.kill(planned.kind);
      log(
        `#${index} kill -9 ${planned.kind} (PID ${killedPid}) at ${(atMs / 1000).toFixed(1)}s${triggered ? ` during ${trig.what}` : ''}`
      );
      await sleep(planned.downMs);
      const restartedPid = await cluster.restart(planned.kind);
      const restartMs = since() - atMs;
      const outcome: FaultOutcome = {
        index,
        kind: planned.kind,
        trigger: trig.what,
        triggered,
        atMs,
        killedPid,
        downMs: planned.downMs,
        restartedPid,
        restartMs,
        recoveredBy: '',
        recoverMs: null,
        statusAtKill: atKill
          ? { episodes: atKill.episodes, trainSteps: atKill.trainSteps, policyVersion: atKill.policyVersion }
          : null,
      };
      faults.push(outcome);
      // Recovery = the progress only a working victim allows: a train step for the trainer, episodes for the rest.
      const recovery = (async () => {
        const base =
          planned.kind === 'trainer' && atKill
            ? atKill
            : await waitFor('status', status, recoveryTimeout, 250, over.signal);
        const [what, value] =
          planned.kind === 'trainer'
            ? (['trainSteps', base.trainSteps] as const)
            : (['episodes', base.episodes] as const);
        outcome.recoveredBy = `${what} > ${value}`;
        await waitFor(
          `progress after the ${planned.kind} fault (${outcome.recoveredBy})`,
          async () => (await status())[what] > value,
          recoveryTimeout,
          250,
          over.signal
        );
        outcome.recoverMs = since() - atMs;
        log(
          `#${index} ${planned.kind} recovered in ${(outcome.recoverMs / 1000).toFixed(1)}s (${outcome.recoveredBy})`
        );
      })();
      recoveries.push(recovery.catch(() => undefined));
      if (opts.serial) await recovery;
      else await waitFor('status after the restart', status, recoveryTimeout);
      const exits = cluster.unexpectedExits();
      if (exits.length > 0) throw new Error(`a role died on its own during chaos: ${exits.join('; ')}`);
    }
    await Promise.all(recoveries);
    // One more train step with every role back proves training goes on; then a graceful stop.
    const stepsAfter = (await waitFor('status', status, recoveryTimeout)).trainSteps;
    await waitFor(
      'a train step after the last fault',
      async () => (await status()).trainSteps > stepsAfter,
      recoveryTimeout
    );
    await waitFor('the stop update', () => campaign.stop(), recoveryTimeout);
    let result: CampaignResult | undefined;
    let error: string | undefined;
    try {
      result = await waitFor('the campaign result', () => campaign.result(), recoveryTimeout);
    } catch (err) {
      error = String(err);
    }
    log(`campaign ${result ? 'completed' : `did not complete: ${error}`}`);
    const store = ObjectStore.fromSettings(cluster.settings);
    const evidence = await collectAuditEvidence(store, client.temporal, campaignId);
    const audit = auditCampaign(evidence.input);
    const faultsByKind: Record<string, number> = {};
    for (const f of faults) faultsByKind[f.kind] = (faultsByKind[f.kind] ?? 0) + 1;
    return {
      seed: opts.seed,
      rounds: opts.rounds,
      campaignId,
      schedule,
      faults,
      faultsByKind,
      campaign: { completed: result !== undefined, ...(error ? { error } : {}), ...(result ? { result } : {}) },
      audit,
      history: evidence.history,
      unexpectedExits: cluster.unexpectedExits(),
      wallMs: since(),
    };
  } finally {
    over.abort();
    await Promise.all(recoveries);
    await client?.close().catch(() => undefined);
    await cluster.stop();
  }
}
