/**
 * Records the Temporal histories the replay test (test/replay/replay.test.ts) checks every workflow code
 * change against: a small but real campaign on the dev server, in a private namespace and bucket, that
 * goes through what a days-long campaign meets — continue-as-new, Updates (pause, resume, setConfig,
 * quarantineTask, pinCheckpoint), children reporting by signal, a terminated task-group child (a child
 * failure), and a policy server killed for good (a model rollout drops it) — the `main` set; and a
 * seconds-long campaign with `curation.precollect` on, which goes through the pre-collection phase (the
 * patch `campaign-precollect-phase`: a precollectWorkflow child that fills the experience pool with oracle
 * demonstrations before RL) — the `precollect` set.
 *
 *   npx tsx scripts/record-histories.ts [--only main|precollect|shards|shards-legacy]   # then: npm test -- test/replay
 *
 * Writes test/replay/histories/<workflowType>-<label>.json.gz (the JSON of `historyToJSON`, the same
 * format `temporal workflow show --output json` and the Web UI's download give, gzipped because
 * campaign histories carry their config and state payloads) and index.json (what each file is, and to
 * which set it belongs). `--only` re-records one set and keeps the other's files and index entries.
 * Re-record when workflow code changes on purpose (see docs/upgrades.md); keep the old files of runs
 * that may still be open in production until they have closed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { startBenchCluster, waitFor, type BenchCluster } from '../bench/lib/bench-cluster';
import type { CampaignHandle } from '../client/dartflow-client';
import { campaignWorkflowId } from '../client/dartflow-client';
import { freePort } from '../infra/ports';
import { PROJECT_ROOT } from '../infra/settings';
import { ensureInfra } from './ensure-infra';

type History = temporal.api.history.v1.IHistory;
const EventType = temporal.api.enums.v1.EventType;

export const HISTORIES_DIR = path.join(PROJECT_ROOT, 'test', 'replay', 'histories');

/**
 * The recorded sets: the long campaign with every message kind and fault, the pre-collection one, and a
 * sharded campaign (its shard's runs and a rollout lane). `shards-legacy` is the sharded campaign recorded
 * with workflow code from before rollout lanes (run this script from a checkout of that code with
 * `--only shards-legacy` and copy its files and index entries here): shard runs started then keep one
 * child workflow per group until they continue-as-new, and the current code must still replay them.
 */
const SETS = ['main', 'precollect', 'shards', 'shards-legacy'] as const;
type RecordSet = (typeof SETS)[number];

/** One recorded history, as listed in histories/index.json. */
export interface RecordedHistory {
  /** Which recording it belongs to (absent in indexes written before sets existed: `main`). */
  set?: RecordSet;
  file: string;
  workflowType: string;
  workflowId: string;
  runId: string;
  label: string;
  events: number;
  jsonBytes: number;
  gzBytes: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const has = (h: History, t: temporal.api.enums.v1.EventType): boolean =>
  (h.events ?? []).some((e) => e.eventType === t);

/** Drives the campaign through every message kind and fault the histories must cover; returns its id. */
async function runCampaign(cluster: BenchCluster): Promise<{ campaignId: string; victim: string }> {
  const campaignId = `rec-${Date.now().toString(36)}`;
  const campaign: CampaignHandle = await cluster.client.startCampaign(
    {
      campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 8 },
      rollout: { envConcurrency: 16, maxSteps: 3 },
      trainer: { minGroups: 1, maxGroups: 2 },
      eval: { everyVersions: 3, episodesPerTask: 4, gateEveryVersions: 0 },
      env: { kind: 'simulated' },
    },
    // Small runs: several continue-as-new boundaries, each run's history small enough to commit.
    { continueAsNewAfterIterations: 10 }
  );
  const status = () => campaign.status();
  await waitFor('a first status', status, 120_000);
  console.log(`[record] campaign ${campaignId} started`);

  // Updates early, while the first run is open (each is an Update event pair in its history).
  await campaign.pause();
  await sleep(500);
  await campaign.resume();
  await campaign.setConfig({ 'rollout.temperature': 1.1 });
  const [firstTask] = await campaign.taskStats();
  if (firstTask) {
    await campaign.quarantineTask(firstTask.taskId, true);
    await campaign.quarantineTask(firstTask.taskId, false);
  }

  // A child failure: terminate a running task group soon after it starts, so the run that started it is
  // most likely still open and records ChildWorkflowExecutionTerminated.
  const victim = await waitFor(
    'a running task group',
    async () => {
      for await (const wf of cluster.client.temporal.workflow.list({
        query: `WorkflowType = 'taskGroupWorkflow' AND ExecutionStatus = 'Running'`,
      })) {
        if (wf.workflowId.startsWith(`${campaignId}-g`)) return wf.workflowId;
      }
      return undefined;
    },
    120_000
  );
  await cluster.client.temporal.workflow.getHandle(victim).terminate('record-histories: a child failure');
  console.log(`[record] terminated ${victim}`);

  // A policy server killed for good once training is under way: a later rollout drops it.
  await waitFor('a first train step', async () => ((await status()).trainSteps >= 1 ? true : undefined), 300_000);
  cluster.workers.children.find((c) => c.name === 'policy-p1')?.process.kill('SIGKILL');
  console.log('[record] killed policy server p1');

  // Housekeeping runs on a 30 s timer, longer than a busy run lasts here: a paused run (few iterations,
  // so no continue-as-new) records two periods — the policy-server refresh (a local activity) and the
  // settling of children of earlier runs (describeChildren) — while the rollout drops the dead server.
  await campaign.pause();
  console.log('[record] paused for 65 s (housekeeping)');
  await sleep(65_000);
  await campaign.resume();

  // A manual rollback (pin to the parent of the head) and unpin, once there is a version to go back to.
  const head = await waitFor(
    'a second version',
    async () => {
      const s = await status();
      return s.policyVersion >= 2 ? s.policyVersion : undefined;
    },
    300_000
  );
  await campaign.pinCheckpoint(head - 1).catch(async (err: unknown) => {
    console.log(`[record] pin v${head - 1} refused (${String(err)}); pinning the head v${head} instead`);
    await campaign.pinCheckpoint(head);
  });
  await campaign.pinCheckpoint(null);

  const result = await campaign.result();
  console.log(`[record] campaign done: ${result.trainSteps} train steps, v${result.policyVersion}`);
  return { campaignId, victim };
}

/**
 * A seconds-long campaign through the pre-collection phase: `curation.precollect` with the embedded
 * policy's demonstration policy (`oracle`), one success per task, then two RL train steps. Its one run
 * (no continue-as-new) records the patch marker `campaign-precollect-phase` and the precollectWorkflow
 * child; runs before the main campaign, while both policy servers live.
 */
async function runPrecollectCampaign(cluster: BenchCluster): Promise<{ campaignId: string }> {
  const campaignId = `rec-pre-${Date.now().toString(36)}`;
  const campaign: CampaignHandle = await cluster.client.startCampaign({
    campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 2 },
    rollout: { envConcurrency: 8, maxSteps: 3 },
    trainer: { minGroups: 1, maxGroups: 2 },
    eval: { everyVersions: 100, episodesPerTask: 1, gateEveryVersions: 0 },
    env: { kind: 'simulated' },
    curation: { precollect: true, precollectSuccessesPerTask: 1, precollectMaxAttempts: 4 },
  });
  const result = await campaign.result();
  console.log(
    `[record] pre-collection campaign ${campaignId} done: ${result.trainSteps} train steps, v${result.policyVersion}`
  );
  return { campaignId };
}

/** A sharded campaign whose shards continue-as-new and (with lanes) seal and open lanes. */
async function runShardedCampaign(cluster: BenchCluster): Promise<{ campaignId: string }> {
  const campaignId = `rec-shards-${Date.now().toString(36)}`;
  const campaign = await cluster.client.startCampaign(
    {
      campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 3 },
      rollout: { envConcurrency: 16, maxSteps: 3, schedulerShards: 2 },
      trainer: { minGroups: 1, maxGroups: 2 },
      eval: { everyVersions: 100, episodesPerTask: 1, gateEveryVersions: 0 },
      env: { kind: 'simulated' },
    },
    // Lanes of 16 episodes (two groups) and shards that continue-as-new every few loop iterations.
    { shardContinueAsNewAfterIterations: 8, shardLaneEpisodes: 16 }
  );
  const result = await campaign.result();
  console.log(`[record] sharded campaign ${campaignId} done: ${result.trainSteps} train steps`);
  return { campaignId };
}

async function executions(cluster: BenchCluster, query: string): Promise<{ workflowId: string; runId: string }[]> {
  const out: { workflowId: string; runId: string; start: number }[] = [];
  for await (const wf of cluster.client.temporal.workflow.list({ query }))
    out.push({ workflowId: wf.workflowId, runId: wf.runId, start: wf.startTime.getTime() });
  return out.sort((a, b) => a.start - b.start);
}

async function fetch(cluster: BenchCluster, e: { workflowId: string; runId: string }): Promise<History> {
  return cluster.client.temporal.workflow.getHandle(e.workflowId, e.runId).fetchHistory();
}

/** The first closed execution of a type for which `prefer` holds, else the first closed one. */
async function pick(
  cluster: BenchCluster,
  workflowType: string,
  prefer: (h: History) => boolean
): Promise<{ workflowId: string; runId: string; history: History; preferred: boolean }> {
  const all = await executions(cluster, `WorkflowType = '${workflowType}' AND ExecutionStatus = 'Completed'`);
  if (all.length === 0) throw new Error(`no completed ${workflowType} to record`);
  for (const e of all.slice(0, 40)) {
    const history = await fetch(cluster, e);
    if (prefer(history)) return { ...e, history, preferred: true };
  }
  return { ...all[0]!, history: await fetch(cluster, all[0]!), preferred: false };
}

function write(
  set: RecordSet,
  workflowType: string,
  label: string,
  e: { workflowId: string; runId: string },
  h: History
) {
  const json = historyToJSON(h);
  const gz = gzipSync(Buffer.from(json), { level: 9 });
  const file = `${workflowType}-${label}.json.gz`;
  fs.writeFileSync(path.join(HISTORIES_DIR, file), gz);
  const rec: RecordedHistory = {
    set,
    file,
    workflowType,
    workflowId: e.workflowId,
    runId: e.runId,
    label,
    events: h.events?.length ?? 0,
    jsonBytes: Buffer.byteLength(json),
    gzBytes: gz.length,
  };
  return rec;
}

/** The main set: every run of the long campaign, a task group, the terminated one, a train step, a rollout, an evaluation. */
async function recordMain(cluster: BenchCluster, campaignId: string, victim: string): Promise<RecordedHistory[]> {
  const recorded: RecordedHistory[] = [];
  // Every run of the campaign (the visibility listing by workflow id returns all runs).
  const runs = await executions(cluster, `WorkflowId = '${campaignWorkflowId(campaignId)}'`);
  for (const [i, run] of runs.entries())
    recorded.push(write('main', 'campaignWorkflow', `run${i}`, run, await fetch(cluster, run)));

  const group = await pick(cluster, 'taskGroupWorkflow', (h) =>
    has(h, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
  );
  recorded.push(write('main', 'taskGroupWorkflow', 'completed', group, group.history));
  const terminated = (await executions(cluster, `WorkflowId = '${victim}'`))[0]!;
  recorded.push(write('main', 'taskGroupWorkflow', 'terminated', terminated, await fetch(cluster, terminated)));
  const train = await pick(cluster, 'trainStepWorkflow', () => true);
  recorded.push(write('main', 'trainStepWorkflow', 'completed', train, train.history));
  // A rollout where the dead server's reload timed out (schedule-to-start) and it was dropped.
  const rollout = await pick(cluster, 'modelRolloutWorkflow', (h) =>
    has(h, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)
  );
  recorded.push(
    write('main', 'modelRolloutWorkflow', rollout.preferred ? 'dropped-server' : 'completed', rollout, rollout.history)
  );
  const evaluation = await pick(cluster, 'evaluateWorkflow', () => true);
  recorded.push(write('main', 'evaluateWorkflow', 'completed', evaluation, evaluation.history));

  const campaignRuns = recorded.filter((r) => r.workflowType === 'campaignWorkflow');
  const childFailureSeen = await Promise.all(campaignRuns.map((r) => fetch(cluster, r))).then((hs) =>
    hs.some((h) => has(h, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED))
  );
  if (!childFailureSeen)
    console.log(
      '[record] note: no campaign run recorded ChildWorkflowExecutionTerminated (the run that started the victim had continued-as-new); re-record for full coverage'
    );
  if (!rollout.preferred) console.log('[record] note: no rollout dropped the dead server; recorded a plain one');
  return recorded;
}

/** The precollect set: the pre-collection campaign's run(s) and its precollectWorkflow child. */
async function recordPrecollect(cluster: BenchCluster, campaignId: string): Promise<RecordedHistory[]> {
  const recorded: RecordedHistory[] = [];
  const runs = await executions(cluster, `WorkflowId = '${campaignWorkflowId(campaignId)}'`);
  for (const [i, run] of runs.entries()) {
    const history = await fetch(cluster, run);
    recorded.push(write('precollect', 'campaignWorkflow', `precollect-run${i}`, run, history));
  }
  // The campaign starts its pre-collection child as `<campaign workflow id>-precollect`.
  const children = await executions(cluster, `WorkflowId = '${campaignWorkflowId(campaignId)}-precollect'`);
  const child = children[0];
  if (!child) throw new Error(`campaign ${campaignId} ran no precollectWorkflow child to record`);
  recorded.push(write('precollect', 'precollectWorkflow', 'completed', child, await fetch(cluster, child)));
  return recorded;
}

/** The shards sets: every run of shard 0, and one of its lanes that completed (when the code has lanes). */
async function recordShards(
  cluster: BenchCluster,
  campaignId: string,
  set: 'shards' | 'shards-legacy'
): Promise<RecordedHistory[]> {
  const label = set === 'shards' ? 'lanes' : 'legacy';
  const recorded: RecordedHistory[] = [];
  const shard0 = `${campaignWorkflowId(campaignId)}-shard-0`;
  // Waits until the shard has completed (it drains after the campaign's stopShard).
  await waitFor(
    `${shard0} to complete`,
    async () => (await cluster.client.temporal.workflow.getHandle(shard0).describe()).status.name === 'COMPLETED',
    120_000
  );
  const runs = await executions(cluster, `WorkflowId = '${shard0}'`);
  for (const [i, run] of runs.entries())
    recorded.push(write(set, 'rolloutShardWorkflow', `${label}-run${i}`, run, await fetch(cluster, run)));
  const lanes = (
    await executions(cluster, `WorkflowType = 'rolloutLaneWorkflow' AND ExecutionStatus = 'Completed'`).catch(() => [])
  ).filter((e) => e.workflowId.startsWith(shard0));
  if (lanes[0])
    recorded.push(write(set, 'rolloutLaneWorkflow', `${label}-completed`, lanes[0], await fetch(cluster, lanes[0])));
  else if (set === 'shards') throw new Error(`campaign ${campaignId}: shard 0 completed no rollout lane to record`);
  return recorded;
}

interface HistoryIndexFile {
  recordedAt: string;
  campaignId: string;
  precollectCampaignId?: string;
  histories: RecordedHistory[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({ args: process.argv.slice(2), options: { only: { type: 'string' } } });
  const only = values.only as RecordSet | undefined;
  if (only !== undefined && !SETS.includes(only)) throw new Error(`--only must be ${SETS.join(' or ')}, got "${only}"`);
  const wanted = (set: RecordSet) => only === undefined || only === set;
  const indexPath = path.join(HISTORIES_DIR, 'index.json');
  // Read also when re-recording every set: the shards-legacy set is kept (this code cannot record it).
  const previous: HistoryIndexFile | undefined = fs.existsSync(indexPath)
    ? (JSON.parse(fs.readFileSync(indexPath, 'utf8')) as HistoryIndexFile)
    : undefined;
  if (only !== undefined && !previous) throw new Error(`--only ${only}: no ${indexPath} to add to; record every set`);

  await ensureInfra({ quiet: true });
  const cluster = await startBenchCluster('rec', {
    envWorkers: 1,
    envSlots: 8,
    envKind: 'simulated',
    simulatedProfile: 'fast',
    simulatedBernoulliReward: 0.5,
    policyServers: 2,
    policyBasePort: await freePort(),
  });
  try {
    // The short one first: the main campaign kills a policy server for good.
    const pre = wanted('precollect') ? await runPrecollectCampaign(cluster) : undefined;
    const mainRun = wanted('main') ? await runCampaign(cluster) : undefined;
    // shards-legacy only on request (from a checkout of the code before lanes); a full recording takes `shards`.
    const shardsSet: 'shards' | 'shards-legacy' | undefined =
      only === 'shards-legacy' ? 'shards-legacy' : wanted('shards') ? 'shards' : undefined;
    const sharded = shardsSet ? { set: shardsSet, ...(await runShardedCampaign(cluster)) } : undefined;
    fs.mkdirSync(HISTORIES_DIR, { recursive: true });
    // Keep the other set's files and entries (when re-recording one set); remove everything else.
    const kept = (previous?.histories ?? []).filter(
      (h) => !wanted(h.set ?? 'main') || (only === undefined && h.set === 'shards-legacy')
    );
    const keep = new Set(kept.map((h) => h.file));
    for (const f of fs.readdirSync(HISTORIES_DIR)) if (!keep.has(f)) fs.rmSync(path.join(HISTORIES_DIR, f));
    const recorded: RecordedHistory[] = [...kept];
    if (mainRun) recorded.push(...(await recordMain(cluster, mainRun.campaignId, mainRun.victim)));
    if (pre) recorded.push(...(await recordPrecollect(cluster, pre.campaignId)));
    if (sharded) recorded.push(...(await recordShards(cluster, sharded.campaignId, sharded.set)));
    recorded.sort((a, b) => SETS.indexOf(a.set ?? 'main') - SETS.indexOf(b.set ?? 'main'));

    const campaignId = mainRun?.campaignId ?? previous?.campaignId;
    if (!campaignId) throw new Error('internal: no main campaign id');
    const precollectCampaignId = pre?.campaignId ?? previous?.precollectCampaignId;
    const index: HistoryIndexFile = {
      recordedAt: new Date().toISOString(),
      campaignId,
      ...(precollectCampaignId ? { precollectCampaignId } : {}),
      histories: recorded.map((r) => ({ ...r, set: r.set ?? 'main' })),
    };
    fs.writeFileSync(indexPath, JSON.stringify(index, null, 2) + '\n');
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
    for (const r of recorded)
      console.log(
        `[record] ${r.file.padEnd(44)} ${String(r.events).padStart(5)} events  ${kb(r.jsonBytes).padStart(11)} json  ${kb(r.gzBytes).padStart(10)} gz${keep.has(r.file) ? '  (kept)' : ''}`
      );
    const total = recorded.reduce((n, r) => n + r.gzBytes, 0);
    console.log(
      `[record] ${recorded.length} histories, ${kb(total)} committed, in ${path.relative(PROJECT_ROOT, HISTORIES_DIR)}`
    );
  } finally {
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(`[record] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
