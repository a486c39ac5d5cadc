/**
 * A real campaign end to end on the dev server: orchestrator, env worker (Chromium), policy server and
 * trainer as separate processes (kill -9 able), in a private namespace and bucket. One campaign exercises
 * completion with rising success, continue-as-new, pause/resume/setConfig, and crash recovery of the env
 * worker and the trainer; then a model rollout with a corrupt checkpoint rolls back.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { createCampaignDataActivities } from '../../activities/data/campaign-data';
import { listCheckpoints } from '../../activities/trainer/checkpoints';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { readLineage } from '../../cli/lineage';
import { CampaignHandle, DartflowClient } from '../../client/dartflow-client';
import { registerScratchNamespace } from '../../infra/services';
import type { InfraSettings } from '../../infra/settings';
import type { CampaignStatus } from '../../schemas/campaign';
import { TrajectoryManifestSchema } from '../../schemas/records';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { modelRolloutWorkflow, taskGroupWorkflow } from '../../workflows';
import type { GroupSummary } from '../../schemas/campaign';
import { loadSuite } from '../../tasks/loader';
import { freePort, freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { sleep, waitFor } from '../helpers/wait';

let settings: InfraSettings;
let store: ObjectStore;
let cleanupBucket: () => Promise<void>;
let workers: LocalWorkers;
let client: DartflowClient;
let dataDir: string;

before(async () => {
  const base = testSettings();
  const namespace = `dartflow-test-${uniqueSuffix()}`;
  ({ store, cleanup: cleanupBucket } = await freshBucket('campaign'));
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-campaign-'));
  settings = {
    ...(await registerScratchNamespace(base, namespace)),
    dataDir,
    s3: { ...base.s3, bucket: store.bucket },
  };
  workers = startLocalWorkers(settings, {
    envWorkers: 1,
    envSlots: 2,
    policyServers: 1,
    policyBasePort: await freePort(),
    env: { TEMPORAL_NAMESPACE: namespace, S3_BUCKET: store.bucket, DARTFLOW_DATA_DIR: dataDir },
  });
  client = await DartflowClient.connect(settings);
});

after(async () => {
  await client?.close();
  await workers?.stop();
  await cleanupBucket?.();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

let campaign: CampaignHandle;
const campaignId = `itest-${uniqueSuffix()}`;

test('a campaign learns, continues-as-new, obeys pause/resume/setConfig and survives kill -9 of env worker and trainer', async (t) => {
  campaign = await client.startCampaign(
    {
      campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 8 },
      rollout: { envConcurrency: 8, maxSteps: 4 },
      policy: { bcWarmStartEpisodes: 48, bcEpochs: 10 },
      trainer: {
        learningRate: 3e-3,
        rlLearningRate: 1e-3,
        klBeta: 0,
        minGroups: 2,
        maxGroups: 4,
        epochs: 2,
        // The killed trainer's step and the killed env worker's episodes are retried after 15 s, not the
        // default minute (each kill below waits for it; the activities' options are checked at the end).
        heartbeatTimeoutSeconds: 15,
      },
      env: { episodeHeartbeatTimeoutSeconds: 15 },
      // Sparse evaluations while training success is below 99 %: the BC version is still evaluated at once.
      eval: {
        everyVersions: 4,
        sparseEveryVersions: 8,
        sparseBelowRolloutSuccess: 0.99,
        episodesPerTask: 10,
        gateEveryVersions: 0,
      },
    },
    { continueAsNewAfterIterations: 6 }
  );
  const firstRunId = (await campaign.handle.describe()).runId;

  // pause: no new groups start; once in-flight groups drain, the episode count stands still
  await waitFor('2 train steps', async () => (await campaign.status()).trainSteps >= 2);
  assert.equal((await campaign.pause()).phase, 'paused');
  const drained: CampaignStatus = await waitFor('in-flight groups to drain', async () => {
    const s = await campaign.status();
    return s.groupsInFlight === 0 && !s.trainInFlight ? s : undefined;
  });
  await sleep(2000);
  const still = await campaign.status();
  assert.equal(still.episodes, drained.episodes, 'no episodes while paused');
  assert.equal(still.phase, 'paused');

  // setConfig: a live field is applied, a structural one is rejected by the validator with a reason
  await campaign.setConfig({ 'trainer.learningRate': 0.002 });
  await assert.rejects(
    campaign.setConfig({ 'policy.width': 2 }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError
  );
  await assert.rejects(
    campaign.setConfig({ 'trainer.learningRate': -1 }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError
  );
  assert.equal((await campaign.resume()).phase, 'running');

  // kill -9 the env worker mid-episode, then restart it
  await waitFor('episodes in flight', async () => (await campaign.status()).episodesInFlight > 0);
  const env = workers.children.find((c) => c.role === 'env')!;
  env.process.kill('SIGKILL');
  workers.restart(env.name);

  // kill -9 the trainer during a train step, then restart it
  await waitFor('a train step in flight', async () => (await campaign.status()).trainInFlight, 300_000);
  const trainer = workers.children.find((c) => c.role === 'trainer')!;
  trainer.process.kill('SIGKILL');
  workers.restart(trainer.name);

  const result = await campaign.result();
  assert.ok(result.trainSteps >= 8, `train steps ${result.trainSteps}`);
  const first = result.evals[0]!;
  const last = result.finalEval!;
  assert.deepEqual(
    result.evals.slice(0, 2).map((e) => [e.version, e.atEpisodes]),
    [
      [0, 0],
      [1, 0],
    ],
    'v0, then the behaviour-cloned v1 before any RL episode (the RL start point), whatever the cadence'
  );
  t.diagnostic(
    `evals: ${result.evals.map((e) => `v${e.version} ${e.successRate} ${JSON.stringify(e.perFamily)}`).join(' | ')}`
  );
  assert.ok(last.successRate > first.successRate + 0.2, `success rose: ${first.successRate} → ${last.successRate}`);

  // continue-as-new happened and the state carried over (counters kept growing across runs)
  assert.notEqual((await campaign.handle.describe()).runId, firstRunId);
  let runs = 0;
  for await (const _ of client.temporal.workflow.list({ query: `WorkflowId = '${campaign.handle.workflowId}'` }))
    runs++;
  assert.ok(runs >= 2, `${runs} runs`);

  // search attributes make the campaign filterable (UI, stock CLI, DartflowClient.listCampaigns)
  const listed = await waitFor(
    'visibility of the finished campaign',
    async () => {
      const rows = await client.listCampaigns(`DartflowCampaignId = '${campaignId}' AND DartflowState = 'completed'`);
      return rows.length === 1 ? rows : undefined;
    },
    30_000
  );
  assert.equal(listed[0]!.policyVersion, result.policyVersion);
  assert.equal(listed[0]!.successRate, last.successRate);

  // ledger: one checkpoint chain, every trajectory consumed at most once, none lost to a fake reward
  const lineage = await readLineage(store, campaignId);
  assert.deepEqual(lineage.problems, []);
  assert.equal(lineage.ledger.length, result.trainSteps);
  for (const e of lineage.ledger) {
    for (const c of e.consumed) {
      const m = await store.getJson(c.manifestKey, TrajectoryManifestSchema);
      assert.equal(m.status, 'ok', `${c.trajectoryId} trained on a ${m.status} trajectory`);
      assert.notEqual(m.reward, null);
    }
  }
  for (const key of (await store.list(keys.trajectoryPrefix(campaignId))).filter((k) => k.endsWith('manifest.json'))) {
    const m = await store.getJson(key, TrajectoryManifestSchema);
    if (m.status !== 'ok') assert.equal(m.reward, null, `${key}: an infrastructure failure must not carry a reward`);
  }
  const versions = (await listCheckpoints(store, campaignId)).map((c) => c.version);
  assert.deepEqual(
    versions,
    Array.from({ length: versions.length }, (_, i) => i),
    'versions 0..n without gaps'
  );

  // env.episodeHeartbeatTimeoutSeconds and trainer.heartbeatTimeoutSeconds reached every activity they govern
  const trainStepIds = await waitFor('the train-step children in visibility', async () => {
    const ids: string[] = [];
    for await (const wf of client.temporal.workflow.list({
      query: `WorkflowId STARTS_WITH '${campaignId}-train-' AND ExecutionStatus = 'Completed'`,
    }))
      ids.push(wf.workflowId);
    return ids.length > 0 ? ids : undefined;
  });
  const evalIds: string[] = [];
  for await (const wf of client.temporal.workflow.list({ query: `WorkflowId STARTS_WITH '${campaignId}-eval-'` }))
    evalIds.push(wf.workflowId);
  const heartbeats = [
    ...(await heartbeatTimeouts(campaign.handle.workflowId, firstRunId)), // behaviourClone
    ...(await heartbeatTimeouts(`${campaignId}-demo00000`)),
    ...(await heartbeatTimeouts(`${campaignId}-g000001`)),
    ...(await heartbeatTimeouts(trainStepIds[0]!)),
    ...(evalIds[0] ? await heartbeatTimeouts(evalIds[0]) : []),
  ];
  const types = new Set(heartbeats.map(([type]) => type));
  for (const type of ['behaviourClone', 'runEpisode', 'trainStep']) assert.ok(types.has(type), `${type} scheduled`);
  for (const [type, seconds] of heartbeats)
    if (type === 'runEpisode' || type === 'trainStep' || type === 'behaviourClone')
      assert.equal(seconds, 15, `${type}'s heartbeat timeout`);
});

/** [activity type, heartbeat timeout in seconds] of every activity a workflow run scheduled. */
async function heartbeatTimeouts(workflowId: string, runId?: string): Promise<Array<[string, number]>> {
  const history = await client.temporal.workflow.getHandle(workflowId, runId).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const a = e.activityTaskScheduledEventAttributes;
    return a ? [[a.activityType?.name ?? '', Number(a.heartbeatTimeout?.seconds ?? 0)] as [string, number]] : [];
  });
}

test('a model rollout with a corrupt checkpoint is refused and the server keeps serving the old version', async () => {
  const servers = await createCampaignDataActivities({ store }).listPolicyServers({});
  assert.equal(servers.length, 1);
  const before = (await listCheckpoints(store, campaignId)).at(-1)!;
  // v(n+1): a truncated weights object behind a valid-looking manifest
  const badVersion = before.version + 1;
  const good = await store.getBytes(before.weights.key);
  const ref = await store.putBytes(keys.checkpointWeights(campaignId, badVersion), good.subarray(0, good.length - 100));
  await store.putJson(keys.checkpointManifest(campaignId, badVersion), {
    ...before,
    version: badVersion,
    parentVersion: before.version,
    weights: ref,
    ledgerKey: undefined,
  });
  const served = { [servers[0]!.serverId]: before.version };
  const result = await client.temporal.workflow.execute(modelRolloutWorkflow, {
    taskQueue: TASK_QUEUES.orchestrator,
    workflowId: `${campaignId}-bad-rollout`,
    args: [{ campaignId, version: badVersion, servers, servedVersions: served, gate: null }],
  });
  assert.equal(result.ok, false);
  assert.match(result.reason ?? '', /failed to load/);
  assert.deepEqual(result.servedVersions, served);
  const health = (await (
    await fetch(new URL('/v1/health', servers[0]!.url), {
      headers: { authorization: `Bearer ${fs.readFileSync(path.join(dataDir, 'policy-token'), 'utf8').trim()}` },
    })
  ).json()) as { version: number };
  assert.equal(health.version, before.version);
});

test('mode sync (the coupled baseline) runs through the same code: batch, barrier, train, sync all servers', async () => {
  const id = `itest-sync-${uniqueSuffix()}`;
  const sync = await client.startCampaign({
    campaign: { id, suite: 'quickstart', mode: 'sync', maxTrainSteps: 2 },
    rollout: { envConcurrency: 8, maxSteps: 4 },
    trainer: { learningRate: 3e-3, klBeta: 0, minGroups: 1, maxGroups: 2 },
    eval: { everyVersions: 1, episodesPerTask: 4, gateEveryVersions: 0 },
  });
  const result = await sync.result();
  assert.equal(result.trainSteps, 2);
  const lineage = await readLineage(store, id);
  assert.deepEqual(lineage.problems, []);
  assert.deepEqual(
    lineage.ledger.map((e) => [e.fromVersion, e.toVersion]),
    [
      [0, 1],
      [1, 2],
    ]
  );
  // In sync mode every step trains only on data of the version it starts from (the barrier).
  for (const e of lineage.ledger) for (const c of e.consumed) if (!c.injectedFromPool) assert.equal(c.staleness, 0);
});

test(
  'the warm start runs exactly the demonstration groups asked for, also with more lanes than groups',
  { timeout: 300_000 },
  async () => {
    // 8 demos = 1 group of 8; envConcurrency 24 gives 3 lanes. Lanes that waited together used to take group
    // numbers past the last one: the workflow task failed (task undefined) and the campaign never trained.
    const id = `itest-bc-lanes-${uniqueSuffix()}`;
    const campaign = await client.startCampaign({
      campaign: { id, suite: 'quickstart', maxTrainSteps: 1 },
      rollout: { envConcurrency: 24, maxSteps: 4 },
      policy: { bcWarmStartEpisodes: 8, bcEpochs: 1 },
      trainer: { learningRate: 3e-3, klBeta: 0, minGroups: 1, maxGroups: 2 },
      eval: { everyVersions: 1, episodesPerTask: 2, gateEveryVersions: 0 },
    });
    const firstRunId = (await campaign.handle.describe()).runId;
    const result = await campaign.result();
    assert.ok(result.trainSteps >= 1, `trained ${result.trainSteps} steps`);
    // The warm start runs in the first run (a later one, after continue-as-new, does not start demos).
    const firstRun = await client.temporal.workflow.getHandle(campaign.handle.workflowId, firstRunId).fetchHistory();
    const demoChildren = (firstRun.events ?? []).flatMap((e) => {
      const childId = e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      return childId?.includes('-demo') ? [childId] : [];
    });
    assert.deepEqual(demoChildren, [`${id}-demo00000`]);
    const lineage = await readLineage(store, id);
    assert.deepEqual(lineage.problems, []);
    // The first ledger entry is the behaviour-cloning step: it consumed the one group's successes.
    assert.ok(lineage.ledger[0]!.consumed.length >= 1);
    assert.ok(lineage.ledger[0]!.consumed.every((c) => c.trajectoryId.includes('-demo00000')));
  }
);

test("the pool keyed by instruction: an all-failed group gets its own instruction's success, else the task's newest", async () => {
  // enter-text asks for a different word per seed; the oracle solves it, and one random step cannot
  // (typing and pressing Submit take two), so which groups succeed is certain.
  const task = loadSuite('all').taskSpecs.find((t) => t.id === 'enter-text') as unknown as { id: string } & Record<
    string,
    unknown
  >;
  const campaignId = `itest-pool-${uniqueSuffix()}`;
  const runGroup = async (label: string, seed: number, policy: 'oracle' | 'random'): Promise<GroupSummary> =>
    (await client.temporal.workflow.execute(taskGroupWorkflow, {
      taskQueue: TASK_QUEUES.orchestrator,
      workflowId: `${campaignId}-${label}`,
      workflowExecutionTimeout: '3 minutes',
      args: [
        {
          campaignId,
          groupId: `${campaignId}-${label}`,
          task,
          seed,
          n: 2,
          maxSteps: policy === 'oracle' ? 8 : 1,
          policy: { kind: policy, endpoints: [], temperature: 1 },
          experiencePool: policy === 'random',
          poolWanted: policy === 'oracle' ? 1 : 0,
          poolByInstruction: { maxPerTask: 8 },
        },
      ],
    })) as GroupSummary;
  const own = await runGroup('own', 11, 'oracle');
  const newer = await runGroup('newer', 12, 'oracle');
  assert.ok([...own.trajectories, ...newer.trajectories].every((t) => t.reward === 1 && t.instructionKey));
  const ownKey = own.trajectories[0]!.instructionKey;
  assert.notEqual(newer.trajectories[0]!.instructionKey, ownKey, 'seeds 11 and 12 ask for different words');
  const pooled = await store.list(keys.poolPrefix(campaignId, 'enter-text'));
  assert.equal(pooled.length, 2, `one success per instruction is kept: ${pooled.join(', ')}`);

  const failedSame = await runGroup('failed-same', 11, 'random');
  const injected = failedSame.trajectories.filter((t) => t.injectedFromPool);
  assert.equal(failedSame.trajectories.filter((t) => !t.injectedFromPool && t.reward === 0).length, 2);
  assert.equal(injected.length, 1);
  assert.equal(injected[0]!.trajectoryId, own.trajectories[0]!.trajectoryId, 'its own word, though seed 12 is newer');
  assert.equal(injected[0]!.instructionKey, failedSame.trajectories[0]!.instructionKey);

  const failedOther = await runGroup('failed-other', 13, 'random');
  assert.equal(
    failedOther.trajectories.find((t) => t.injectedFromPool)?.trajectoryId,
    newer.trajectories[0]!.trajectoryId,
    "no success of seed 13's word yet: the task's newest, as DART does"
  );
});

test('a group offers poolWanted successes and the pool keeps poolKeep: later pre-collection rounds keep the earlier ones', async () => {
  const task = loadSuite('quickstart').taskSpecs.find((t) => t.id === 'click-target') as unknown as {
    id: string;
  } & Record<string, unknown>;
  const campaignId = `itest-keep-${uniqueSuffix()}`;
  for (const [round, seed] of [3, 4].entries()) {
    await client.temporal.workflow.execute(taskGroupWorkflow, {
      taskQueue: TASK_QUEUES.orchestrator,
      workflowId: `${campaignId}-r${round}`,
      workflowExecutionTimeout: '3 minutes',
      args: [
        {
          campaignId,
          groupId: `${campaignId}-r${round}`,
          task,
          seed,
          n: 1,
          maxSteps: 4,
          policy: { kind: 'oracle', endpoints: [], temperature: 1 },
          experiencePool: false,
          poolWanted: 1, // the one success still wanted …
          poolKeep: 2, // … of k = 2 per task
        },
      ],
    });
  }
  const pooled = await store.list(keys.poolPrefix(campaignId, 'click-target'));
  assert.equal(pooled.length, 2, `both rounds' successes stay: ${pooled.join(', ')}`);
});
