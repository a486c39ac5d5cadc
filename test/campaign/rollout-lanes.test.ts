/**
 * Rollout lanes (workflows/rollout-lane.ts): a scheduler shard runs its groups' episodes inside lane
 * workflows instead of one child workflow per group. Real dev server (a scratch namespace), the real
 * workflow bundle on the orchestrator queue, the real describeChildren activity, and an env worker whose
 * runEpisode the test holds open, so which groups are running when a lane dies is known, not raced.
 * The shard's "campaign" is a sink workflow (an unsealed, empty lane: it takes any signal and never ends),
 * whose history shows every report the shard sent.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { createChildActivities, type ChildDescription } from '../../activities/data/children';
import type { RunEpisodeParsed, RunEpisodeResult } from '../../activities/env/input';
import { payloadGuardInterceptors } from '../../infra/payload-guard';
import { registerScratchNamespace } from '../../infra/services';
import { connectClient } from '../../infra/temporal-connection';
import type { GroupSummary } from '../../schemas/campaign';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { orchestratorWorkflowCode } from '../../workers/workflow-bundle';
import type { GroupsFinishedReport } from '../../workflows/messages';
import type { RolloutLaneInput } from '../../workflows/rollout-lane';
import type { RolloutShardInput } from '../../workflows/rollout-shard';
import type { TaskGroupInput } from '../../workflows/task-group';
import { testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker } from '../helpers/temporal';
import { waitFor } from '../helpers/wait';

/** Episodes wait here until the test releases their group. */
const release = new Map<string, () => void>();
const gates = new Map<string, Promise<void>>();
const started = new Set<string>();
function gate(groupId: string): Promise<void> {
  let p = gates.get(groupId);
  if (!p) {
    p = new Promise<void>((resolve) => release.set(groupId, resolve));
    gates.set(groupId, p);
  }
  return p;
}
const open = (groupId: string): void => {
  void gate(groupId);
  release.get(groupId)!();
};

let client: Client;
let orchestrator: Worker;
let env: Worker;
let running: Promise<unknown>;
before(async () => {
  const settings = await registerScratchNamespace(testSettings(), `dartflow-test-lanes-${uniqueSuffix()}`);
  const { workflowInterceptors, ...workflowCode } = orchestratorWorkflowCode();
  orchestrator = await createTestWorker(settings, {
    taskQueue: TASK_QUEUES.orchestrator,
    ...workflowCode,
    interceptors: payloadGuardInterceptors({ workflows: workflowInterceptors }),
    activities: createChildActivities(),
  });
  env = await createTestWorker(settings, {
    taskQueue: TASK_QUEUES.env,
    activities: {
      async runEpisode(e: RunEpisodeParsed): Promise<RunEpisodeResult> {
        started.add(e.trajectoryId);
        await gate(e.groupId);
        return {
          trajectoryId: e.trajectoryId,
          taskId: (e.task as { id: string }).id,
          seed: e.seed,
          manifestKey: `trajectories/${e.trajectoryId}/manifest.json`,
          reward: 1,
          status: 'ok',
          numSteps: 1,
          minPolicyVersion: 0,
          maxPolicyVersion: 0,
          envKind: 'test',
        };
      },
    },
  });
  running = Promise.all([orchestrator.run(), env.run()]);
  client = await connectClient(settings);
});

after(async () => {
  for (const r of release.values()) r();
  orchestrator?.shutdown();
  env?.shutdown();
  await running;
  await client?.connection.close();
});

function group(prefix: string, i: number): TaskGroupInput {
  return {
    campaignId: prefix,
    groupId: `${prefix}-g${String(i).padStart(6, '0')}`,
    task: { id: 'click-target-1' },
    seed: i,
    n: 2,
    maxSteps: 1,
    policy: { kind: 'embedded', endpoints: [], temperature: 1 },
    experiencePool: false,
    poolWanted: 0,
  };
}

/** The sink stands in for the campaign: it records every groupsFinished report the shard sends. */
async function startSink(id: string) {
  const input: RolloutLaneInput = {
    campaignId: id,
    shardWorkflowId: `${id}-nobody`,
    campaignWorkflowId: `${id}-nobody`,
    groups: [],
    flushMs: 3_600_000,
    maxBatch: 1_000,
  };
  return client.workflow.start('rolloutLaneWorkflow', {
    taskQueue: TASK_QUEUES.orchestrator,
    workflowId: id,
    args: [input],
  });
}

async function reportsTo(sinkId: string): Promise<{ finished: Set<string>; lost: Map<string, string> }> {
  const history = await client.workflow.getHandle(sinkId).fetchHistory();
  const finished = new Set<string>();
  const lost = new Map<string, string>();
  const converter = client.options.loadedDataConverter.payloadConverter;
  for (const e of history.events ?? []) {
    const a = e.workflowExecutionSignaledEventAttributes;
    if (a?.signalName !== 'groupsFinished') continue;
    const r = converter.fromPayload<GroupsFinishedReport>(a.input!.payloads![0]!);
    for (const g of r.finished as GroupSummary[]) finished.add(g.groupId);
    for (const l of r.lost) lost.set(l.groupId, l.why);
  }
  return { finished, lost };
}

async function childStarts(workflowId: string): Promise<Array<{ type: string; id: string }>> {
  const out: Array<{ type: string; id: string }> = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const h = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    for (const e of h.events ?? []) {
      const a = e.startChildWorkflowExecutionInitiatedEventAttributes;
      if (a) out.push({ type: a.workflowType!.name!, id: a.workflowId! });
    }
  }
  return out;
}

function shardInput(prefix: string, sinkId: string, extra: Partial<RolloutShardInput> = {}): RolloutShardInput {
  return {
    campaignId: prefix,
    campaignWorkflowId: sinkId,
    flushMs: 100,
    maxBatch: 100,
    laneEpisodes: 4,
    reconcileAfterMs: 0,
    reconcileEveryMs: 200,
    ...extra,
  };
}

function startShard(shardId: string, input: RolloutShardInput) {
  return client.workflow.start('rolloutShardWorkflow', {
    taskQueue: TASK_QUEUES.orchestrator,
    workflowId: shardId,
    args: [input],
  });
}

test('a shard runs its groups in lanes, seals a lane once it had its episodes, and ends when stopped', async () => {
  const prefix = `lanes-${uniqueSuffix()}`;
  const sink = await startSink(`${prefix}-sink`);
  const shardId = `${prefix}-shard`;
  // Continue-as-new every few iterations: lanes of earlier runs report to the latest run and are settled.
  const shard = await startShard(shardId, shardInput(prefix, sink.workflowId, { continueAsNewAfterIterations: 3 }));
  const groups = Array.from({ length: 5 }, (_, i) => group(prefix, i));
  await shard.signal('assignGroups', groups.slice(0, 3));
  await shard.signal('assignGroups', groups.slice(3));
  await waitFor(
    'every episode to start',
    async () => started.size >= 10 && groups.every((g) => started.has(`${g.groupId}-e1`)),
    60_000
  );

  // Held groups are visible to the campaign's reconcile: the shard holds them, describeChildren says RUNNING.
  const held = await client.workflow.getHandle(shardId).query<string[]>('groupsHeld');
  assert.deepEqual([...held].sort(), groups.map((g) => g.groupId).sort());
  const described: ChildDescription[] = await new MockActivityEnvironment(undefined, { client }).run(
    createChildActivities().describeChildren,
    { workflowIds: [groups[0]!.groupId, `${prefix}-g999999`], heldBy: [shardId] }
  );
  assert.deepEqual(
    described.map((d) => [d.workflowId, d.status]),
    [
      [groups[0]!.groupId, 'RUNNING'],
      [`${prefix}-g999999`, 'NOT_FOUND'],
    ]
  );

  for (const g of groups) open(g.groupId);
  await waitFor(
    'every group reported finished',
    async () => (await reportsTo(sink.workflowId)).finished.size === 5,
    60_000
  );
  await client.workflow.getHandle(shardId).signal('stopShard');
  await waitFor(
    'the shard to complete',
    async () => (await client.workflow.getHandle(shardId).describe()).status.name === 'COMPLETED',
    60_000
  );

  const starts = await childStarts(shardId);
  assert.ok(
    starts.every((s) => s.type === 'rolloutLaneWorkflow'),
    'no group became a workflow of its own'
  );
  // 10 episodes at 4 per lane: groups of 2 episodes fill a lane with 2 groups, so at least 3 lanes.
  assert.ok(starts.length >= 3, `lanes rotated (${starts.length} lanes)`);
  for (const s of starts) {
    const d = await client.workflow.getHandle(s.id).describe();
    assert.equal(d.status.name, 'COMPLETED', `${s.id} completed once sealed and done`);
  }
  const runs: string[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId = '${shardId}'` })) runs.push(wf.runId);
  assert.ok(runs.length >= 2, `the shard continued-as-new with lanes in flight (${runs.length} runs)`);
  const { lost } = await reportsTo(sink.workflowId);
  assert.equal(lost.size, 0, 'nothing lost');
  await sink.terminate('test done');
});

test('a lane that dies reports none of its groups: the shard passes them on as lost, other lanes go on', async () => {
  const prefix = `lanedies-${uniqueSuffix()}`;
  const sink = await startSink(`${prefix}-sink`);
  const shardId = `${prefix}-shard`;
  const shard = await startShard(shardId, shardInput(prefix, sink.workflowId));
  const groups = Array.from({ length: 4 }, (_, i) => group(prefix, i));
  await shard.signal('assignGroups', groups);
  await waitFor('every episode to start', async () => groups.every((g) => started.has(`${g.groupId}-e1`)), 60_000);
  const lanes = (await childStarts(shardId)).map((s) => s.id);
  assert.equal(lanes.length, 2, 'two lanes of two groups each');

  // The first lane dies with both its groups running.
  await client.workflow.getHandle(lanes[0]!).terminate('test: a lane dies');
  await waitFor(
    'the dead lane’s groups reported lost',
    async () => (await reportsTo(sink.workflowId)).lost.size === 2,
    60_000
  );
  const { lost } = await reportsTo(sink.workflowId);
  assert.deepEqual([...lost.keys()].sort(), [groups[0]!.groupId, groups[1]!.groupId]);
  assert.match(lost.get(groups[0]!.groupId)!, /lane .* ended/);

  // The other lane's groups still finish and are reported.
  for (const g of groups) open(g.groupId);
  await waitFor(
    'the live lane’s groups reported finished',
    async () => (await reportsTo(sink.workflowId)).finished.size === 2,
    60_000
  );
  assert.deepEqual([...(await reportsTo(sink.workflowId)).finished].sort(), [groups[2]!.groupId, groups[3]!.groupId]);
  await shard.signal('stopShard');
  await waitFor('the shard to complete', async () => (await shard.describe()).status.name === 'COMPLETED', 60_000);
  await sink.terminate('test done');
});

test('a shard started again under the same id while its old lane still runs opens lanes of its own', async () => {
  const prefix = `lanerestart-${uniqueSuffix()}`;
  const sink = await startSink(`${prefix}-sink`);
  const shardId = `${prefix}-shard`;
  const start = () => startShard(shardId, shardInput(prefix, sink.workflowId));
  const [first, second] = [group(prefix, 0), group(prefix, 1)];
  const before = await start();
  await before.signal('assignGroups', [first]);
  await waitFor('the first group to run', async () => started.has(`${first.groupId}-e1`), 60_000);
  const [oldLane] = (await childStarts(shardId)).map((s) => s.id);
  await before.terminate('test: the shard dies; its lane runs on');

  // Started again within seconds (as the campaign does): its lane ids must not collide with the running one.
  const after = await start();
  await after.signal('assignGroups', [second]);
  await waitFor('the second group to run', async () => started.has(`${second.groupId}-e1`), 60_000);
  const lanes = [...new Set((await childStarts(shardId)).map((s) => s.id))];
  assert.equal(lanes.length, 2, `two lanes: ${lanes.join(', ')}`);
  for (const id of lanes)
    assert.equal((await client.workflow.getHandle(id).describe()).status.name, 'RUNNING', `${id} runs`);

  // The old lane's group reaches the new shard run by workflow id and is passed on; both are reported.
  open(first.groupId);
  open(second.groupId);
  await waitFor('both groups reported', async () => (await reportsTo(sink.workflowId)).finished.size === 2, 60_000);
  assert.ok(oldLane && lanes.includes(oldLane));
  await after.signal('stopShard');
  await waitFor('the shard to complete', async () => (await after.describe()).status.name === 'COMPLETED', 60_000);
  await client.workflow
    .getHandle(oldLane!)
    .signal('sealLane')
    .catch(() => undefined);
  await sink.terminate('test done');
});
