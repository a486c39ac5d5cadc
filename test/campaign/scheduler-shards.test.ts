/**
 * Scheduler shards (rollout.schedulerShards, issue 12.3), on the real dev server with every role as its own
 * process and simulated envs: the campaign hands its group starts to two shard workflows and hears back in
 * batches, so its own history holds no task-group child at all; the shards run the groups in rollout lanes
 * that they seal and replace as they fill; one shard is terminated mid-run and the
 * campaign starts it again, settles the groups it had and completes with nothing in flight; the shards end
 * when the campaign does.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { temporal } from '@temporalio/proto';
import { startBenchCluster, type BenchCluster } from '../../bench/lib/bench-cluster';
import { freePort, uniqueSuffix } from '../helpers/infra';
import { waitFor } from '../helpers/wait';

const EventType = temporal.api.enums.v1.EventType;

let cluster: BenchCluster;
before(async () => {
  cluster = await startBenchCluster('shards', {
    envWorkers: 1,
    envSlots: 8,
    envKind: 'simulated',
    simulatedProfile: 'fast',
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
    policyBasePort: await freePort(),
  });
});

after(async () => {
  await cluster?.close();
});

test('two scheduler shards start every group, report in batches, survive a terminated shard, and end with the campaign', async () => {
  const campaignId = `shards-${uniqueSuffix()}`;
  const campaign = await cluster.client.startCampaign(
    {
      campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 5 },
      rollout: { envConcurrency: 24, maxSteps: 3, schedulerShards: 2 },
      trainer: { minGroups: 1, maxGroups: 2 },
      eval: { everyVersions: 5, episodesPerTask: 2, gateEveryVersions: 0 },
      env: { kind: 'simulated' },
    },
    // Both the campaign and its shards continue-as-new mid-run (children of earlier runs are then settled
    // by describing them; a shard of an earlier campaign run is found running, not started twice).
    // Lanes of 16 episodes (2 groups): every shard seals lanes and opens new ones during the run.
    { continueAsNewAfterIterations: 15, shardContinueAsNewAfterIterations: 10, shardLaneEpisodes: 16 }
  );
  const temporalClient = cluster.client.temporal;
  const campaignWf = `campaign-${campaignId}`;
  const shardIds = [0, 1].map((i) => `${campaignWf}-shard-${i}`);

  // Both shards run and groups flow through them, in rollout lanes (never a workflow per group).
  const childStarts = async (id: string) => {
    const starts: string[] = [];
    for await (const wf of temporalClient.workflow.list({ query: `WorkflowId = '${id}'` })) {
      const h = await temporalClient.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      for (const e of h.events ?? [])
        if (e.eventType === EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
          starts.push(e.startChildWorkflowExecutionInitiatedEventAttributes!.workflowType!.name!);
    }
    return starts;
  };
  await waitFor('two lanes started by each shard', async () => {
    const counts = await Promise.all(shardIds.map(async (id) => (await childStarts(id)).length));
    return counts.every((n) => n >= 2);
  });

  // Terminate shard 1 while it has groups: the campaign must notice, start it again and settle its groups.
  const victim = temporalClient.workflow.getHandle(shardIds[1]!);
  const firstRun = (await victim.describe()).runId;
  await victim.terminate('test: a scheduler shard dies');
  await waitFor(
    'shard 1 started again',
    async () => {
      const d = await temporalClient.workflow.getHandle(shardIds[1]!).describe();
      return d.runId !== firstRun && d.status.name === 'RUNNING';
    },
    120_000
  );

  const result = await campaign.result();
  const status = await campaign.status();
  assert.equal(result.trainSteps, 5);
  assert.equal(status.groupsInFlight, 0, 'nothing is left in flight, the dead shard’s groups included');
  assert.ok(result.episodes > 0);
  assert.ok(status.runIndex >= 1, `the campaign continued-as-new (run ${status.runIndex})`);

  // The campaign's own histories (every run) start no task group and receive batched reports instead.
  let groupStarts = 0;
  let batches = 0;
  let shardStarts = 0;
  for await (const wf of temporalClient.workflow.list({ query: `WorkflowId = '${campaignWf}'` })) {
    const h = await temporalClient.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    for (const e of h.events ?? []) {
      const started = e.startChildWorkflowExecutionInitiatedEventAttributes;
      if (started?.workflowType?.name === 'taskGroupWorkflow' && started.workflowId?.includes('-g')) groupStarts++;
      if (started?.workflowType?.name === 'rolloutShardWorkflow') shardStarts++;
      if (e.workflowExecutionSignaledEventAttributes?.signalName === 'groupsFinished') batches++;
    }
  }
  assert.equal(groupStarts, 0, 'no group was started by the campaign itself');
  assert.ok(shardStarts >= 3, `both shards started, and shard 1 again (${shardStarts} starts)`);
  assert.ok(batches > 0, 'finished groups arrived in batches');

  // Shard 0 continued-as-new too (it was never terminated): its runs form one chain.
  await waitFor('shard 0 to show more than one run', async () => {
    let runs = 0;
    for await (const _ of temporalClient.workflow.list({ query: `WorkflowId = '${shardIds[0]!}'` })) runs++;
    return runs >= 2;
  });

  // Every shard ends once the campaign is done (stopShard: drain, then complete), and so does every lane
  // the surviving shard started (the terminated run's lanes were abandoned to finish on their own).
  for (const id of shardIds)
    await waitFor(`${id} to complete`, async () => {
      const d = await temporalClient.workflow.getHandle(id).describe();
      return d.status.name === 'COMPLETED';
    });
  const shard0Children = await childStarts(shardIds[0]!);
  assert.ok(
    shard0Children.every((t) => t === 'rolloutLaneWorkflow'),
    `shard 0 started only lanes (${[...new Set(shard0Children)].join(', ')})`
  );
  for await (const lane of temporalClient.workflow.list({
    query: `WorkflowType = 'rolloutLaneWorkflow' AND ExecutionStatus = 'Running'`,
  }))
    if (lane.workflowId.startsWith(shardIds[0]!))
      assert.fail(`lane ${lane.workflowId} of shard 0 still runs after the campaign ended`);
});
