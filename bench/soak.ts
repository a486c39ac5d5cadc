/**
 * Soak benchmark (issue 12, deliverable 5): one long campaign, audited afterwards. Two scenarios:
 *
 * - `faults` (default): a private cluster (infra/chaos.ts: own dev server + MinIO, 2 policy servers, a
 *   versioned orchestrator) on simulated envs in compressed time, a tiny train batch, until ≥ 100,000
 *   episodes and ≥ 2,000 train steps (or --max-minutes), with a fault every --fault-every minutes from a
 *   seeded plan (bench/lib/soak-schedule.ts): kill -9 + restart of the env worker, a policy server, the
 *   trainer and the orchestrator, Temporal and MinIO restarts, and once each a policy server killed for
 *   good, a running task group terminated and a deploy of the orchestrator: the first build runs older
 *   workflow code (this checkout with the workflows/ of --deploy-from: by default the parent of the newest
 *   commit that changed workflows/; bench/lib/soak-deploy.ts), the deploy starts this checkout's code
 *   under a new build id and makes it current.
 * - `point9`: 256 simulated envs at ×0.2 OSWorld latency, 300 s train steps (simulatedStepSeconds 1500),
 *   envConcurrency 3 × envs, suite all, for --minutes (default 60), no faults, in a scratch namespace and
 *   bucket on the shared dev server.
 *
 * Both report: the largest history of any run, continue-as-new count, non-determinism errors, trajectories
 * unaccounted, trained from an abandoned branch (infra/chaos-audit.ts), env utilization and trainer idle
 * over the whole run and per 5-minute bucket (charts), episodes, train steps, wall time.
 *
 *   npx tsx bench/soak.ts [--scenario faults] [--episodes 100000] [--train-steps 2000] [--max-minutes 360]
 *                         [--fault-every 3] [--seed 1] [--slots 32] [--profile osworld] [--scale 0.01]
 *                         [--deploy-from auto|<git rev>|none] [--max-staleness 1]
 *   npx tsx bench/soak.ts --scenario point9 [--minutes 60] [--envs 256] [--scale 0.2] [--train-seconds 1500]
 *   (both: [--bucket-minutes 5] [--publish]; faults: [--keep-data] keeps the private cluster's data dir)
 *   faults in segments: [--state-dir <dir>] keeps the soak's ledger and the cluster's data in <dir>;
 *   [--segment-minutes N] ends this segment after N minutes with a whole-cluster crash (kill -9 of every
 *   process, the campaign left running in the SQLite file); `--resume <dir>` brings the same cluster and
 *   campaign back and goes on (also after an unplanned end: the machine or session went away). The gaps
 *   count as faults (cluster-crash) and are left out of every time-based figure.
 * Writes soak.json (keyed by scenario) and soak-<scenario>-utilization.png / -history.png to the bench
 * output dir (bench/lib/output.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DartflowClient, type CampaignHandle } from '../client/dartflow-client';
import { ChaosCluster, FAULT_KINDS, waitFor } from '../infra/chaos';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng } from '../lib/charts';
import type { CampaignStatus } from '../schemas/campaign';
import type { CampaignConfigInput } from '../schemas/config';
import { ensureInfra } from '../scripts/ensure-infra';
import { ObjectStore } from '../storage/object-store';
import type { CampaignResult } from '../workflows/campaign';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { NOTHING_WRITTEN, benchOutFile, setBenchPublish, shownPath } from './lib/output';
import { splitPublishFlag } from './lib/output-dir';
import { runsInOrder } from './lib/history-stats';
import { collectSoakEvidence, type SoakEvidence } from './lib/soak-evidence';
import { injectSoakFault, watchClusterCrashRecovery, type SoakFaultOutcome } from './lib/soak-faults';
import { HISTORY_EVENT_WARN, ISSUE_TARGETS, soakGoals, type SoakGoal, type SoakTargets } from './lib/soak-goals';
import { exportDeploySource } from './lib/soak-deploy';
import { soakBucketsOverWindows, soakTotalsOverWindows, type SoakBucket, type SoakTotals } from './lib/soak-metrics';
import {
  closeSegment,
  driverAlive,
  readSoakState,
  segmentWindows,
  soakStatePath as soakStatePathOf,
  writeSoakState,
  type SoakSegment,
  type SoakState,
} from './lib/soak-state';
import { ONE_OFF_FAULTS, soakSchedule } from './lib/soak-schedule';

type Scenario = 'faults' | 'point9';

interface CampaignOutcome {
  campaignId: string;
  startedAt: number;
  stopRequestedAt: number;
  stoppedBy: string;
  completed: boolean;
  error?: string;
  result?: CampaignResult;
  lastStatus: CampaignStatus | null;
}

export interface SoakReport {
  scenario: Scenario;
  measuredAt: string;
  args: string[];
  settings: Record<string, number | string>;
  simulated: string;
  /** Always the issue's targets; --episodes, --train-steps, --minutes only decide when a run stops. */
  targets: SoakTargets;
  campaign: Omit<CampaignOutcome, 'lastStatus'> & { runIndex: number | null };
  window: { start: number; end: number; seconds: number };
  episodes: number;
  trainSteps: number;
  wallMinutes: number;
  totals: SoakTotals;
  buckets: SoakBucket[];
  history: {
    runs: number;
    totalEvents: number;
    largest: SoakEvidence['historySummary']['largest'];
    largestByType: Record<string, { runs: number; maxEvents: number; maxBytes: number }>;
    continueAsNew: number;
    maxCarriedBytes: number;
    nondeterminismErrors: number;
    campaignRuns: Array<{ run: number; events: number; bytes: number }>;
  };
  server: SoakEvidence['serverStats'];
  audit: Omit<SoakEvidence['audit'], 'problems'> & { problems: number; firstProblems: string[] };
  faults?: SoakFaultOutcome[];
  faultsByKind?: Record<string, number>;
  unexpectedExits?: string[];
  /** faults: the code each orchestrator build ran (--deploy-from). */
  deploy?: SoakDeployInfo;
  /** faults driven in segments (--segment-minutes / --resume): each one's times, end and up-time. */
  segments?: Array<SoakSegment & { upMinutes: number }>;
  goals: SoakGoal[];
}

export interface SoakDeployInfo {
  fromRev: string;
  toRev: string;
  changedWorkflowFiles: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls the campaign until `done` says stop (checked every 5 s), calling `tick` in between (the fault
 * injector); then asks for a graceful stop and waits for the result (drain + final evaluation).
 */
async function driveCampaign(
  campaign: CampaignHandle,
  opts: {
    startedAt: number;
    done: (s: CampaignStatus | null, elapsedMs: number) => string | null;
    tick?: (s: CampaignStatus | null) => Promise<void>;
    /** A reason to end this segment without stopping the campaign (bench/lib/soak-state.ts); null: go on. */
    suspend?: () => string | null;
    beforeStop?: () => Promise<void>;
    log: (line: string) => void;
  }
): Promise<CampaignOutcome | { suspendedBy: string; lastStatus: CampaignStatus | null }> {
  let last: CampaignStatus | null = null;
  let lastLog = 0;
  let stoppedBy: string | null = null;
  while (!stoppedBy) {
    last = await campaign.status().catch(() => last);
    if (Date.now() - lastLog >= 30_000) {
      lastLog = Date.now();
      opts.log(
        last
          ? `episodes ${last.episodes}, train steps ${last.trainSteps}, v${last.policyVersion}, run ${last.runIndex}, in flight ${last.episodesInFlight}, buffered ${last.bufferedGroups}`
          : 'status unavailable'
      );
    }
    stoppedBy = opts.done(last, Date.now() - opts.startedAt);
    if (stoppedBy) break;
    const suspendedBy = opts.suspend?.();
    if (suspendedBy) return { suspendedBy, lastStatus: last };
    await opts.tick?.(last);
    await sleep(5_000);
  }
  await opts.beforeStop?.();
  const stopRequestedAt = Date.now();
  opts.log(`stopping (${stoppedBy}) …`);
  await waitFor('the stop update', () => campaign.stop(), 300_000, 1_000);
  let result: CampaignResult | undefined;
  let error: string | undefined;
  try {
    result = await Promise.race([
      campaign.result(),
      sleep(900_000).then(() => {
        throw new Error('the campaign did not finish within 15 minutes of stop');
      }),
    ]);
  } catch (err) {
    error = String(err);
  }
  last = await campaign.status().catch(() => last);
  return {
    campaignId: campaign.campaignId,
    startedAt: opts.startedAt,
    stopRequestedAt,
    stoppedBy,
    completed: result !== undefined,
    ...(error ? { error } : {}),
    ...(result ? { result } : {}),
    lastStatus: last,
  };
}

function buildReport(
  scenario: Scenario,
  args: string[],
  settings: Record<string, number | string>,
  simulated: string,
  targets: SoakTargets,
  run: CampaignOutcome,
  ev: SoakEvidence,
  slots: number,
  bucketMs: number,
  extra: {
    faults?: SoakFaultOutcome[];
    unexpectedExits?: string[];
    deploy?: SoakDeployInfo;
    /** A soak driven in segments: the up-time windows (the gaps, cluster down, count in neither figure). */
    segments?: SoakSegment[];
  } = {}
): SoakReport {
  const window = { start: ev.firstLeaseAt ?? run.startedAt, end: run.stopRequestedAt };
  const windows = extra.segments ? segmentWindows(extra.segments, ev.firstLeaseAt, run.stopRequestedAt) : [window];
  const totals = soakTotalsOverWindows(ev.episodes, ev.steps, slots, windows);
  const h = ev.historySummary;
  const faultsByKind: Record<string, number> = {};
  for (const f of extra.faults ?? []) if (!f.error) faultsByKind[f.kind] = (faultsByKind[f.kind] ?? 0) + 1;
  const { problems, ...audit } = ev.audit;
  // Up-time: a segmented soak's gaps (the whole cluster down) are not minutes of the scenario.
  const wallMinutes = extra.segments
    ? segmentWindows(extra.segments, null, run.stopRequestedAt).reduce((a, w) => a + w.end - w.start, 0) / 60_000
    : (run.stopRequestedAt - run.startedAt) / 60_000;
  const trainSteps = ev.audit.trainSteps;
  const base = {
    scenario,
    episodes: ev.rolloutEpisodes,
    trainSteps,
    wallMinutes,
    largestHistoryEvents: h.largest?.events ?? 0,
    nondeterminismErrors: Math.max(h.nondeterminismErrors, ev.serverStats.nondeterminismErrors),
    unaccounted: ev.audit.trajectories.unaccounted,
    trainedFromAbandonedBranch: ev.audit.trainedFromAbandonedBranch,
    auditProblems: problems.length,
  };
  const goals = soakGoals(
    extra.faults
      ? {
          ...base,
          faultsByKind,
          requiredFaultKinds: [...FAULT_KINDS, ...ONE_OFF_FAULTS],
          unrecoveredFaults: extra.faults.filter((f) => f.recoverMs === null && !f.interruptedBySegmentEnd).length,
          ...(faultsByKind.deploy
            ? { deployChangedWorkflowFiles: extra.deploy?.changedWorkflowFiles.length ?? 0 }
            : {}),
        }
      : base,
    targets
  );
  return {
    scenario,
    measuredAt: new Date().toISOString(),
    args,
    settings,
    simulated,
    targets,
    campaign: {
      campaignId: run.campaignId,
      startedAt: run.startedAt,
      stopRequestedAt: run.stopRequestedAt,
      stoppedBy: run.stoppedBy,
      completed: run.completed,
      ...(run.error ? { error: run.error } : {}),
      ...(run.result ? { result: run.result } : {}),
      runIndex: run.lastStatus?.runIndex ?? null,
    },
    window: { ...window, seconds: totals.windowSeconds },
    episodes: ev.rolloutEpisodes,
    trainSteps,
    wallMinutes,
    totals,
    buckets: soakBucketsOverWindows(ev.episodes, ev.steps, slots, windows, bucketMs),
    history: {
      runs: h.runs,
      totalEvents: h.totalEvents,
      largest: h.largest,
      largestByType: Object.fromEntries(
        Object.entries(h.byType).map(([t, v]) => [t, { runs: v.runs, maxEvents: v.maxEvents, maxBytes: v.maxBytes }])
      ),
      continueAsNew: h.continueAsNew,
      maxCarriedBytes: h.maxCarriedBytes,
      nondeterminismErrors: base.nondeterminismErrors,
      campaignRuns: runsInOrder(ev.runs, 'campaignWorkflow').map((r, i) => ({
        run: i + 1,
        events: r.events,
        bytes: r.bytes,
      })),
    },
    server: ev.serverStats,
    audit: { ...audit, problems: problems.length, firstProblems: problems.slice(0, 20) },
    ...(extra.faults ? { faults: extra.faults, faultsByKind } : {}),
    ...(extra.unexpectedExits ? { unexpectedExits: extra.unexpectedExits } : {}),
    ...(extra.deploy ? { deploy: extra.deploy } : {}),
    ...(extra.segments
      ? {
          segments: extra.segments.map((sg, i) => ({
            ...sg,
            upMinutes: ((windows[i]?.end ?? 0) - (windows[i]?.start ?? 0)) / 60_000,
          })),
        }
      : {}),
    goals,
  };
}

const simProfile = (p: string): 'fast' | 'browser' | 'osworld' => {
  if (p === 'fast' || p === 'browser' || p === 'osworld') return p;
  throw new Error(`--profile must be fast, browser or osworld, got ${p}`);
};

// ---- scenario: faults ----------------------------------------------------------------------------------

interface FaultsSettings {
  episodes: number;
  trainSteps: number;
  /** Up-time of the whole soak (all segments), then it stops. */
  maxMinutes: number;
  faultEvery: number;
  seed: number;
  slots: number;
  profile: 'fast' | 'browser' | 'osworld';
  scale: number;
  oneOffsWithin: number;
  maxStaleness: number;
}

function faultsSettings(values: Record<string, string | undefined>, saved?: SoakState['settings']): FaultsSettings {
  // A resumed soak keeps the plan it started with; only --max-minutes may be raised for the remaining segments.
  const v = (key: string, flag: string, dflt: number) => Number(saved?.[key] ?? values[flag] ?? dflt);
  return {
    episodes: v('episodes', 'episodes', 100_000),
    trainSteps: v('trainSteps', 'train-steps', 2_000),
    maxMinutes: Number(values['max-minutes'] ?? saved?.maxMinutes ?? 360),
    faultEvery: v('faultEvery', 'fault-every', 3),
    seed: v('seed', 'seed', 1),
    slots: v('slots', 'slots', 32),
    profile: simProfile(String(saved?.profile ?? values.profile ?? 'osworld')),
    scale: v('scale', 'scale', 0.01),
    oneOffsWithin: v('oneOffsWithin', 'one-offs-within', 9),
    // DART's 1 by default; more lets the trainer run ahead of the model rollouts (more steps per hour).
    maxStaleness: v('maxStaleness', 'max-staleness', 1),
  };
}

const DOOMED_POLICY_SERVER = 'p1';

/**
 * The faults scenario. With `--state-dir <dir>` (or `--resume <dir>`) it can span several segments: the
 * soak's ledger (bench/lib/soak-state.ts) and the private cluster's data live in the dir; a segment ends
 * at `--segment-minutes` with a whole-cluster crash (kill -9 of every process) or whenever the driver's
 * machine goes away, and `--resume <dir>` brings the same cluster and campaign back. Returns null when
 * this segment ended without stopping the campaign.
 */
async function soakFaults(
  values: Record<string, string | undefined>,
  args: string[],
  log: (l: string) => void
): Promise<SoakReport | null> {
  const resumeDir = values.resume;
  const stateDir = resumeDir ?? values['state-dir'];
  const state: SoakState | undefined = resumeDir ? readSoakState(resumeDir) : undefined;
  if (state) {
    const last = state.segments[state.segments.length - 1]!;
    if (last.endedBy === 'stopped')
      throw new Error(`--resume ${resumeDir}: that soak finished (its campaign was stopped); start a new one`);
    if (last.driverPid !== process.pid && driverAlive(last.driverPid))
      throw new Error(
        `--resume ${resumeDir}: the driver of its last segment (PID ${last.driverPid}) is still running; stop it first`
      );
  } else if (stateDir && fs.existsSync(soakStatePathOf(stateDir)))
    throw new Error(
      `--state-dir ${stateDir} holds a soak already: resume it with --resume ${stateDir}, or pick a new dir`
    );
  const s = faultsSettings(values, state?.settings);
  const segmentMinutes = values['segment-minutes'] !== undefined ? Number(values['segment-minutes']) : null;
  const bucketMs = Number(values['bucket-minutes'] ?? 5) * 60_000;
  log(
    `faults scenario: ${JSON.stringify(s)}${state ? ` (resuming ${state.campaignId}, segment ${state.segments.length + 1})` : ''}`
  );
  const schedule = soakSchedule(s.seed, Math.ceil(s.maxMinutes / s.faultEvery) + 1, {
    downMs: { min: 500, max: 5_000 },
    oneOffWithin: s.oneOffsWithin,
  });
  const currentBuild = state?.cluster.orchestratorBuild ?? 'soak-build-1';
  // The first orchestrator build runs older workflow code; the deploy cuts over to this checkout (--deploy-from).
  const deploySpec = state
    ? state.deploy.fromRev === 'this checkout'
      ? 'none'
      : state.deploy.fromRev
    : (values['deploy-from'] ?? 'auto');
  const source = currentBuild === 'soak-build-1' || !state ? exportDeploySource(PROJECT_ROOT, deploySpec) : undefined;
  const deploy: SoakDeployInfo = state
    ? state.deploy
    : source
      ? {
          fromRev: source.fromRev,
          toRev: source.dirty ? `${source.toRev} (with local edits)` : source.toRev,
          changedWorkflowFiles: source.changedWorkflowFiles,
        }
      : { fromRev: 'this checkout', toRev: 'this checkout', changedWorkflowFiles: [] };
  if (state && source && !state.deploy.toRev.startsWith(source.toRev))
    throw new Error(
      `--resume: this checkout is at ${source.toRev.slice(0, 10)}, the soak started at ${state.deploy.toRev.slice(0, 10)}; resume it from the same checkout (every restarted role loads the code on disk)`
    );
  log(
    source && currentBuild === 'soak-build-1'
      ? `deploy: build soak-build-1 runs the workflows/ of ${deploy.fromRev.slice(0, 10)}, soak-build-2 runs ${deploy.toRev.slice(0, 10)} (${deploy.changedWorkflowFiles.length} workflow files differ: ${deploy.changedWorkflowFiles.join(', ')})`
      : state
        ? `deploy: ${currentBuild} serves (deployed before this segment)`
        : 'deploy: both builds run this checkout (--deploy-from none)'
  );
  const keepData = values['keep-data'] === 'true';
  const cluster = await ChaosCluster.start({
    ...(source && currentBuild === 'soak-build-1' ? { orchestratorProjectRoot: source.root } : {}),
    envKind: 'simulated',
    simulatedProfile: s.profile,
    simulatedTimeScale: s.scale,
    simulatedBernoulliReward: 0.5,
    envSlots: s.slots,
    policyServers: 2,
    orchestratorBuildId: currentBuild,
    ...(stateDir ? { dataDir: state?.cluster.dataDir ?? path.resolve(stateDir, 'cluster') } : {}),
    ...(state ? { ports: state.cluster.ports, skipPolicyServers: state.cluster.retiredPolicyServers } : {}),
    // --keep-data: leave the private cluster's Temporal db, MinIO data and worker logs for a post-mortem.
    ...(keepData ? { keepData: true } : {}),
  });
  const restartedAt = Date.now();
  if (keepData || stateDir) log(`data, SQLite and worker logs kept in ${cluster.dataDir}`);
  const over = new AbortController();
  const recoveries: Promise<void>[] = [];
  let client: DartflowClient | undefined;
  let suspended = false;
  try {
    client = await waitFor(
      'a client of the private cluster',
      () => DartflowClient.connect(cluster.settings),
      120_000,
      1_000
    );
    const id = state?.campaignId ?? `soak-${s.seed}-${benchSuffix()}`;
    const config: CampaignConfigInput & { campaign: { id: string } } = {
      campaign: { id, suite: 'quickstart', maxTrainSteps: 1_000_000, maxEpisodes: 10_000_000 },
      // Short episodes, 3× as many in flight as slots (no slot waits on a group barrier).
      rollout: { envConcurrency: 3 * s.slots, maxSteps: 4, nMax: 8 },
      policy: { bcWarmStartEpisodes: 0, servers: 2 },
      // A tiny batch so train steps come fast: ≥ 2,000 of them fit in a few hours.
      trainer: { learningRate: 3e-3, klBeta: 0, minGroups: 1, maxGroups: 2, epochs: 1 },
      env: { kind: 'simulated', simulatedProfile: s.profile, simulatedTimeScale: s.scale, slotsPerWorker: s.slots },
      eval: { everyVersions: 100_000, episodesPerTask: 1, gateEveryVersions: 0 },
      curation: { maxStaleness: s.maxStaleness },
    };
    const startedAt = state?.startedAt ?? Date.now();
    const campaign = state ? client.getCampaign(id) : await client.startCampaign(config);
    log(
      `campaign ${id} on private Temporal ${cluster.settings.temporal.address}, MinIO ${cluster.settings.s3.endpoint}`
    );
    const faults: SoakFaultOutcome[] = (state?.faults ?? []) as SoakFaultOutcome[];
    const segment: SoakSegment = {
      startedAt: restartedAt,
      lastAliveAt: restartedAt,
      driverPid: process.pid,
      lastStatus: null,
    };
    let st: SoakState | undefined = stateDir
      ? state
        ? { ...state, segments: [...state.segments, segment] }
        : {
            version: 1,
            campaignId: id,
            startedAt,
            settings: { ...s },
            args,
            cluster: {
              dataDir: cluster.dataDir,
              ports: cluster.ports,
              orchestratorBuild: currentBuild,
              retiredPolicyServers: [],
            },
            deploy,
            faults: [],
            segments: [segment],
          }
      : undefined;
    let lastWrite = 0;
    const save = (force = false) => {
      if (!st || !stateDir || (!force && Date.now() - lastWrite < 15_000)) return;
      lastWrite = Date.now();
      const segs = [...st.segments];
      segs[segs.length - 1] = { ...segment };
      st = {
        ...st,
        faults: faults as SoakState['faults'],
        segments: segs,
        cluster: {
          ...st.cluster,
          orchestratorBuild: cluster.orchestratorBuild ?? st.cluster.orchestratorBuild,
          retiredPolicyServers: faults.some((f) => f.kind === 'policy-for-good' && !f.error)
            ? [DOOMED_POLICY_SERVER]
            : [],
        },
      };
      writeSoakState(stateDir, st);
    };
    save(true);
    if (state) {
      const prev = state.segments[state.segments.length - 1]!;
      const watch = watchClusterCrashRecovery(
        { campaign, startedAt, recoveryTimeoutMs: 600_000, signal: over.signal, log },
        faults.length,
        { lastAliveAt: prev.lastAliveAt, restartedAt, planned: prev.endedBy === 'planned crash' },
        prev.lastStatus
      );
      faults.push(watch.outcome);
      recoveries.push(watch.recovery.then(() => save(true)));
    } else await waitFor('the first train step', async () => (await campaign.status()).trainSteps >= 1, 300_000, 1_000);
    // Up-time before this segment: the soak's minutes count only while the cluster was up.
    const upBeforeMs = (state?.segments ?? []).reduce((a, sg) => a + sg.lastAliveAt - sg.startedAt, 0);
    const plannedFaults = () => faults.filter((f) => f.kind !== 'cluster-crash').length;
    let nextFaultAt = Date.now() + s.faultEvery * 60_000;
    const run = await driveCampaign(campaign, {
      startedAt,
      log,
      done: (cur) => {
        if (cur) {
          segment.lastStatus = { episodes: cur.episodes, trainSteps: cur.trainSteps, policyVersion: cur.policyVersion };
        }
        segment.lastAliveAt = Date.now();
        save();
        if (cur && cur.episodes >= s.episodes && cur.trainSteps >= s.trainSteps) return 'targets met';
        if (upBeforeMs + Date.now() - restartedAt >= s.maxMinutes * 60_000) return `--max-minutes ${s.maxMinutes}`;
        const exits = cluster.unexpectedExits();
        return exits.length ? `a role died on its own: ${exits.join('; ')}` : null;
      },
      suspend: () =>
        segmentMinutes !== null && Date.now() - restartedAt >= segmentMinutes * 60_000
          ? `--segment-minutes ${segmentMinutes}`
          : null,
      tick: async () => {
        if (Date.now() < nextFaultAt || plannedFaults() >= schedule.length) return;
        const planned = schedule[plannedFaults()]!;
        const { outcome, recovery } = await injectSoakFault(
          {
            cluster,
            temporal: client!.temporal,
            campaign,
            startedAt,
            doomedPolicyServer: `policy-${DOOMED_POLICY_SERVER}`,
            deployBuildId: 'soak-build-2',
            triggerTimeoutMs: 30_000,
            recoveryTimeoutMs: 300_000,
            signal: over.signal,
            log,
          },
          faults.length,
          planned
        );
        faults.push(outcome);
        save(true);
        recoveries.push(recovery.then(() => save(true)));
        nextFaultAt = Date.now() + s.faultEvery * 60_000;
      },
      // A fault just before the end still gets its chance to show recovery before the stop.
      beforeStop: () => Promise.all(recoveries).then(() => undefined),
    });
    if ('suspendedBy' in run) {
      // A planned whole-cluster crash: the campaign is left running in the SQLite file, nothing is stopped.
      segment.lastAliveAt = Date.now();
      save(true);
      if (st && stateDir) writeSoakState(stateDir, (st = closeSegment(st, 'planned crash')));
      log(
        `segment over (${run.suspendedBy}): kill -9 of every process of the cluster; data kept in ${cluster.dataDir}`
      );
      suspended = true;
      over.abort();
      await cluster.crash();
      log(`resume with: npm run bench -- soak --resume ${stateDir ?? '?'}`);
      return null;
    }
    if (st && stateDir) {
      segment.lastAliveAt = run.stopRequestedAt;
      save(true);
      writeSoakState(stateDir, (st = closeSegment(st, 'stopped')));
    }
    log(`campaign ${run.completed ? 'completed' : `did not complete: ${run.error ?? ''}`}; reading evidence …`);
    const ev = await collectSoakEvidence(
      // The store of the private MinIO (its data dir survives restarts).
      ObjectStore.fromSettings(cluster.settings),
      client.temporal,
      id,
      log
    );
    return buildReport(
      'faults',
      args,
      { ...s, bucketMinutes: bucketMs / 60_000, ...(st ? { segments: st.segments.length } : {}) },
      `simulated ${s.profile} env latencies × ${s.scale} (compressed time), bernoulli(0.5) reward, ${s.slots} env slots, 2 policy servers, maxSteps 4, groups of ≤ 8, train batch 1–2 groups, maxStaleness ${s.maxStaleness}; a private dev server (SQLite) and MinIO and every role on this 2-core machine${st && st.segments.length > 1 ? `; driven in ${st.segments.length} segments, each gap a whole-cluster crash (figures over up-time only)` : ''}`,
      ISSUE_TARGETS.faults,
      { ...run, startedAt },
      ev,
      s.slots,
      bucketMs,
      {
        faults,
        unexpectedExits: cluster.unexpectedExits(),
        deploy,
        ...(st && st.segments.length > 1 ? { segments: st.segments } : {}),
      }
    );
  } finally {
    over.abort();
    if (!suspended) {
      await Promise.all(recoveries);
      await client?.close().catch(() => undefined);
      await cluster.stop();
    } else await client?.close().catch(() => undefined);
    source?.remove();
  }
}

// ---- scenario: point 9 ---------------------------------------------------------------------------------

async function soakPoint9(values: Record<string, string | undefined>, args: string[], log: (l: string) => void) {
  const s = {
    minutes: Number(values.minutes ?? 60),
    envs: Number(values.envs ?? 256),
    scale: Number(values.scale ?? 0.2),
    trainSeconds: Number(values['train-seconds'] ?? 1500),
    queue: Number(values.queue ?? 3),
  };
  const bucketMs = Number(values['bucket-minutes'] ?? 5) * 60_000;
  log(`point9 scenario: ${JSON.stringify(s)}`);
  const cluster = await startBenchCluster('soak9', {
    envWorkers: 1,
    envSlots: s.envs,
    envKind: 'simulated',
    simulatedProfile: 'osworld',
    simulatedTimeScale: s.scale,
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
    policyBasePort: 8990 + Math.floor(Math.random() * 100),
  });
  try {
    const id = `soak9-${benchSuffix()}`;
    const startedAt = Date.now();
    const campaign = await cluster.client.startCampaign({
      campaign: { id, suite: 'all', maxTrainSteps: 100_000 },
      rollout: { envConcurrency: s.envs * s.queue, nMax: 8 },
      trainer: { minGroups: 6, maxGroups: 8, simulatedStepSeconds: s.trainSeconds },
      env: { kind: 'simulated', simulatedProfile: 'osworld', simulatedTimeScale: s.scale, slotsPerWorker: s.envs },
      eval: { everyVersions: 100_000, episodesPerTask: 1, gateEveryVersions: 0 },
    });
    log(`campaign ${id} in namespace ${cluster.namespace} on the shared dev server, bucket ${cluster.store.bucket}`);
    const run = await driveCampaign(campaign, {
      startedAt,
      log,
      done: (_st, elapsed) => (elapsed >= s.minutes * 60_000 ? `--minutes ${s.minutes}` : null),
    });
    if ('suspendedBy' in run) throw new Error('point9 has no segments');
    log(`campaign ${run.completed ? 'completed' : `did not complete: ${run.error ?? ''}`}; reading evidence …`);
    const ev = await collectSoakEvidence(cluster.store, cluster.client.temporal, id, log);
    return buildReport(
      'point9',
      args,
      { ...s, bucketMinutes: bucketMs / 60_000 },
      `${s.envs} simulated OSWorld-like envs (reset ≈25 s, step ≈2.6 s, heavy tails) × ${s.scale}; trainer step held to ${s.trainSeconds} × ${s.scale} = ${s.trainSeconds * s.scale} s after the real trainStep; envConcurrency ${s.queue} × envs; suite all; a scratch namespace on the shared dev server (SQLite), every role on this 2-core machine; no faults`,
      ISSUE_TARGETS.point9,
      run,
      ev,
      s.envs,
      bucketMs
    );
  } finally {
    await cluster.close();
  }
}

// ---- output ----------------------------------------------------------------------------------------------

async function writeCharts(r: SoakReport): Promise<string[]> {
  const chromium = loadInfraSettings().chromiumPath;
  const util = benchOutFile(`soak-${r.scenario}-utilization.png`);
  await writeSvgAsPng(
    lineChartSvg(
      [
        { name: 'env utilization %', points: r.buckets.map((b) => [b.endS / 60, b.envUtilization * 100]) },
        { name: 'trainer idle %', points: r.buckets.map((b) => [b.endS / 60, b.trainerIdle * 100]) },
      ],
      {
        title: `Soak ${r.scenario}: env utilization and trainer idle per ${r.settings.bucketMinutes}-min bucket (${r.episodes.toLocaleString('en-US')} episodes, ${r.trainSteps} train steps)`,
        xLabel: 'minutes since the first episode (bucket end)',
        yLabel: 'percent of bucket',
        yMin: 0,
        yMax: 100,
        width: 1000,
      }
    ),
    util,
    chromium
  );
  const hist = benchOutFile(`soak-${r.scenario}-history.png`);
  await writeSvgAsPng(
    lineChartSvg([{ name: 'events per campaign run', points: r.history.campaignRuns.map((c) => [c.run, c.events]) }], {
      title: `Soak ${r.scenario}: history size of each campaign run (${r.history.continueAsNew} continue-as-new over all workflows)`,
      xLabel: 'campaign run (continue-as-new order)',
      yLabel: 'history events',
      yMin: 0,
      yMax: HISTORY_EVENT_WARN * 1.1,
      hLines: [{ y: HISTORY_EVENT_WARN, label: 'Temporal warns at 10,240' }],
      width: 1000,
    }),
    hist,
    chromium
  );
  return [util, hist];
}

export function soakSummary(r: SoakReport): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const l = r.history.largest;
  return [
    `soak ${r.scenario}: ${r.episodes.toLocaleString('en-US')} rollout episodes, ${r.trainSteps} train steps, ${r.wallMinutes.toFixed(1)} min (stopped by ${r.campaign.stoppedBy}; campaign ${r.campaign.completed ? 'completed' : `did not complete: ${r.campaign.error ?? ''}`})`,
    `largest history: ${l ? `${l.events} events / ${l.bytes} bytes (${l.type} ${l.workflowId})` : '—'}; continue-as-new ${r.history.continueAsNew}; non-determinism errors ${r.history.nondeterminismErrors}; ${r.history.runs} runs read`,
    `trajectories unaccounted ${r.audit.trajectories.unaccounted}; trained from an abandoned branch ${r.audit.trainedFromAbandonedBranch}; audit problems ${r.audit.problems}`,
    `train steps that failed: ${r.server.failedTrainSteps}${r.server.trainStepErrors.length ? ` (first: ${r.server.trainStepErrors.slice(0, 3).join(' | ')})` : ''}`,
    `whole run: env utilization ${pct(r.totals.envUtilization)}, trainer idle ${pct(r.totals.trainerIdle)} (${r.totals.trainerIdleSeconds.toFixed(0)} s of ${r.totals.windowSeconds.toFixed(0)} s)`,
    ...(r.faults
      ? [
          `faults: ${r.faults.length} (${Object.entries(r.faultsByKind ?? {})
            .map(([k, v]) => `${k} ${v}`)
            .join(
              ', '
            )}); recovered ${r.faults.filter((f) => f.recoverMs !== null).length}/${r.faults.length}; workflow tasks by build ${JSON.stringify(r.server.workflowTasksByBuild)}`,
        ]
      : []),
    '',
    '| goal | target | measured | met |',
    '|---|---|---|---|',
    ...r.goals.map((g) => `| ${g.goal} | ${g.target} | ${g.value} | ${g.met ? 'yes' : '**not met**'} |`),
  ].join('\n');
}

export async function benchSoak(argv: string[]): Promise<void | typeof NOTHING_WRITTEN> {
  ignoreLateRetriesOfClosedChannels();
  const keepData = argv.includes('--keep-data');
  const args = argv.filter((a) => a !== '--keep-data');
  const { values } = parseArgs({
    args,
    options: Object.fromEntries(
      [
        'scenario',
        'episodes',
        'train-steps',
        'max-minutes',
        'fault-every',
        'seed',
        'slots',
        'profile',
        'scale',
        'one-offs-within',
        'bucket-minutes',
        'minutes',
        'envs',
        'train-seconds',
        'queue',
        'deploy-from',
        'max-staleness',
        'state-dir',
        'resume',
        'segment-minutes',
      ].map((k) => [k, { type: 'string' as const }])
    ),
  }) as { values: Record<string, string | undefined> };
  // A flag without a value (parseArgs above reads string options only).
  if (keepData) values['keep-data'] = 'true';
  const scenario = (values.scenario ?? 'faults') as Scenario;
  if (scenario !== 'faults' && scenario !== 'point9')
    throw new Error(`--scenario must be faults or point9, got ${String(values.scenario)}`);
  const t0 = Date.now();
  const log = (line: string) => console.log(`[soak ${scenario} ${((Date.now() - t0) / 1000).toFixed(0)}s] ${line}`);
  if ((values.resume || values['state-dir'] || values['segment-minutes']) && scenario !== 'faults')
    throw new Error('--state-dir, --resume and --segment-minutes belong to the faults scenario');
  if (values['segment-minutes'] && !values['state-dir'] && !values.resume)
    throw new Error('--segment-minutes needs --state-dir <dir> (where the soak keeps what a resume needs)');
  const report = scenario === 'faults' ? await soakFaults(values, args, log) : await soakPoint9(values, args, log);
  if (!report) return NOTHING_WRITTEN; // a segment of a faults soak ended; --resume goes on
  const out = benchOutFile('soak.json');
  const previous = fs.existsSync(out) ? (JSON.parse(fs.readFileSync(out, 'utf8')) as Record<string, unknown>) : {};
  fs.writeFileSync(out, `${JSON.stringify({ ...previous, suite: 'soak', [scenario]: report }, null, 2)}\n`);
  log(`wrote ${shownPath(out)}`);
  for (const f of await writeCharts(report).catch((err: unknown) => {
    log(`charts not written: ${String(err)}`);
    return [];
  }))
    log(`wrote ${shownPath(f)}`);
  console.log(`\n${soakSummary(report)}\n`);
}

/**
 * An hours-long run must not die while it reads its evidence because a closed gRPC connection's retry
 * timer fired late (@temporalio/client's retry interceptor throws "Channel has been shut down" from a
 * timer, uncaught; seen once after a 60-minute point-9 run): that call's answer is no longer wanted.
 */
let lateRetriesIgnored = false;
function ignoreLateRetriesOfClosedChannels(): void {
  if (lateRetriesIgnored) return;
  lateRetriesIgnored = true;
  process.on('uncaughtException', (err: unknown) => {
    if (err instanceof Error && err.message === 'Channel has been shut down') {
      console.warn(`[soak] ignored a late gRPC retry on a closed connection: ${err.message}`);
      return;
    }
    console.error(err);
    process.exit(1);
  });
}

if (require.main === module) {
  const { publish, args } = splitPublishFlag(process.argv.slice(2));
  setBenchPublish(publish);
  const needsSharedInfra = args.includes('point9');
  (needsSharedInfra ? ensureInfra({ quiet: true }) : Promise.resolve())
    .then(() => benchSoak(args))
    .then(() => process.exit(0))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
