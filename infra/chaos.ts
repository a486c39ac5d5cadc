/**
 * Chaos harness shared by test/chaos/chaos.test.ts and `npm run bench -- chaos`: a private Temporal dev
 * server (own SQLite file, free ports) and a private MinIO (own data dir, free port) with dartflow's four
 * roles as child processes, and real faults — kill -9 by PID (checked gone) followed by a restart: of
 * an env worker, the policy server, the trainer, the orchestrator worker, the dev server (same SQLite
 * file) and MinIO (same data dir). Never touches the shared servers of `npm run infra:up`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { createPrng, shuffled } from '../algorithms/prng';
import { readLineage } from '../cli/lineage';
import { startLocalWorkers, type LocalWorkers, type Role } from '../cli/local-workers';
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
  /** Keep the private data dir (logs, SQLite, MinIO data) after stop, for debugging. */
  keepData?: boolean;
  /** Echo the roles' output to this process's stdout. */
  echo?: boolean;
}

const ROLE_OF: Record<'env' | 'policy' | 'trainer' | 'orchestrator', Role> = {
  env: 'env',
  policy: 'policy',
  trainer: 'trainer',
  orchestrator: 'orchestrator',
};

/**
 * A private deployment: dev server + MinIO + one process per role, all started here and stopped by PID.
 * `settings` point at the private servers (pass them to DartflowClient.connect / ObjectStore.fromSettings).
 */
export class ChaosCluster {
  private temporalPid: number | undefined;
  private minioPid: number | undefined;
  private workersHandle: LocalWorkers | undefined;
  private constructor(
    readonly settings: InfraSettings,
    readonly dataDir: string,
    readonly dbFile: string,
    private readonly opts: ChaosClusterOptions
  ) {}

  get workers(): LocalWorkers {
    if (!this.workersHandle) throw new Error('chaos cluster: workers not started');
    return this.workersHandle;
  }

  static async start(opts: ChaosClusterOptions = {}): Promise<ChaosCluster> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-chaos-'));
    const [tPort, tUi, mPort, mConsole, policyPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ] as [number, number, number, number, number];
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
    };
    const settings = loadInfraSettings({ ...process.env, ...env });
    const dbFile = path.join(dataDir, 'temporal', 'chaos.sqlite');
    const cluster = new ChaosCluster(settings, dataDir, dbFile, opts);
    try {
      await cluster.startMinio();
      await cluster.startTemporal();
      cluster.workersHandle = startLocalWorkers(settings, {
        envWorkers: 1,
        envSlots: opts.envSlots ?? 4,
        envKind: opts.envKind ?? 'simulated',
        ...(opts.simulatedProfile ? { simulatedProfile: opts.simulatedProfile } : {}),
        policyServers: 1,
        policyBasePort: policyPort,
        env,
        ...(opts.echo ? { echo: true } : {}),
      });
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  get logDir(): string {
    return path.join(this.dataDir, 'logs');
  }

  /** The PID currently serving a role (one env worker, one policy server, one trainer, one orchestrator). */
  pidOf(kind: FaultKind): number | undefined {
    if (kind === 'temporal') return this.temporalPid;
    if (kind === 'minio') return this.minioPid;
    const c = this.workers.children.find((x) => x.role === ROLE_OF[kind]);
    return c?.process.pid;
  }

  /** kill -9 the victim by PID and wait until the process is gone; returns the PID killed. */
  async kill(kind: FaultKind): Promise<number> {
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
    const child = this.workers.children.find((x) => x.role === ROLE_OF[kind]);
    if (!child?.process.pid) throw new Error(`no running ${kind} process`);
    const pid = child.process.pid;
    const exited = new Promise<void>((resolve) => {
      if (child.process.exitCode !== null || child.process.signalCode !== null) resolve();
      else child.process.once('exit', () => resolve());
    });
    await killNine(pid);
    await exited;
    if (child.process.signalCode !== 'SIGKILL')
      throw new Error(
        `${child.name} (PID ${pid}) exited with ${String(child.process.signalCode ?? child.process.exitCode)}, not by SIGKILL`
      );
    return pid;
  }

  /** Brings the victim back (same ports, same SQLite file, same MinIO data dir); resolves when it is up. */
  async restart(kind: FaultKind): Promise<number> {
    if (kind === 'temporal') return this.startTemporal();
    if (kind === 'minio') return this.startMinio();
    const child = this.workers.children.find((x) => x.role === ROLE_OF[kind]);
    if (!child) throw new Error(`no ${kind} process known`);
    const c = this.workers.restart(child.name);
    if (!c.process.pid) throw new Error(`${child.name} did not start`);
    return c.process.pid;
  }

  /** True when the named role's process is running (not exited). */
  roleRunning(kind: 'env' | 'policy' | 'trainer' | 'orchestrator'): boolean {
    const c = this.workers.children.find((x) => x.role === ROLE_OF[kind]);
    return Boolean(c && c.process.exitCode === null && c.process.signalCode === null);
  }

  /** Roles that died on their own (not by our SIGKILL): a crash under chaos is a finding. */
  unexpectedExits(): string[] {
    return this.workers.children
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

  /** Stops every process this cluster started (by PID) and removes the private data dir. */
  async stop(): Promise<void> {
    await this.workersHandle?.stop().catch(() => undefined);
    await this.stopServers();
    if (!this.opts.keepData) fs.rmSync(this.dataDir, { recursive: true, force: true });
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
  /** Episodes a batched runEpisodes activity reported as failed (each retried on its own). */
  failedEpisodeOutcomes: number;
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const ET = temporal.api.enums.v1.EventType;

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
        break;
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

/**
 * Everything the audit needs: manifests (campaign and .eval prefixes), ledger, checkpoints, discard
 * records from MinIO, and every workflow history of the (private) namespace from Temporal.
 */
export async function collectAuditEvidence(
  store: ObjectStore,
  client: Client,
  campaignId: string
): Promise<{ input: AuditInput; history: HistoryStats }> {
  const manifests: ManifestEvidence[] = [];
  for (const [scope, prefix] of [
    ['campaign', keys.trajectoryPrefix(campaignId)],
    ['eval', keys.trajectoryPrefix(`${campaignId}.eval`)],
  ] as const) {
    for (const key of (await store.list(prefix)).filter((k) => k.endsWith('/manifest.json'))) {
      const m = await store.getJson(key, TrajectoryManifestSchema);
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
    }
  }
  const lineage = await readLineage(store, campaignId);
  const history: HistoryStats = {
    workflows: 0,
    activityRetries: {},
    activityTimeouts: 0,
    activityFailures: 0,
    workflowTaskTimeouts: 0,
    workflowTaskFailures: 0,
    failedEpisodeOutcomes: 0,
  };
  const groups: GroupEvidence[] = [];
  for await (const wf of client.workflow.list()) {
    const h = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    const events = h.events ?? [];
    history.workflows++;
    countHistory(events, history);
    if (wf.type === 'taskGroupWorkflow') groups.push(groupEvidenceFromHistory(wf.workflowId, events, history));
  }
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
function triggerFor(kind: FaultKind): { what: string; holds: (s: CampaignStatus) => boolean } {
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
