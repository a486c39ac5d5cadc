/**
 * The control plane under the faults a days-long campaign meets (issue 12), on the real dev server with
 * every role as its own process: simulated envs (so it is fast), two policy servers, continue-as-new
 * every few iterations. In one campaign:
 * - the status query answers from the very start (handlers are registered before the first await);
 * - a task-group child is terminated: it never signals, yet the campaign settles it as lost (its env
 *   capacity comes back, its episodes are counted as infrastructure failures, a 'lost' discard record is
 *   written) and goes on;
 * - one policy server is killed for good: later model rollouts drop it and go on with the other, without
 *   a rollback;
 * - continue-as-new happens while train steps and rollouts are in flight, and the last trained version
 *   still ends up served and evaluated.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startBenchCluster, type BenchCluster } from '../../bench/lib/bench-cluster';
import type { CampaignHandle } from '../../client/dartflow-client';
import { DiscardRecordSchema } from '../../schemas/discards';
import { keys } from '../../storage/keys';
import { freePort, uniqueSuffix } from '../helpers/infra';
import { waitFor } from '../helpers/wait';

let cluster: BenchCluster;
before(async () => {
  cluster = await startBenchCluster('ctl', {
    envWorkers: 1,
    envSlots: 8,
    envKind: 'simulated',
    simulatedProfile: 'fast',
    simulatedBernoulliReward: 0.5,
    policyServers: 2,
    policyBasePort: await freePort(),
  });
});

after(async () => {
  await cluster?.close();
});

test('child failure, a dead policy server and continue-as-new mid-step: the campaign settles all and completes', async () => {
  const campaignId = `ctl-${uniqueSuffix()}`;
  const campaign: CampaignHandle = await cluster.client.startCampaign(
    {
      campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 10 },
      rollout: { envConcurrency: 16, maxSteps: 3 },
      trainer: { minGroups: 1, maxGroups: 2 },
      // The dead server is dropped once its reload has waited 10 s for a pick-up, not the default minute.
      policy: { reloadPickupTimeoutSeconds: 10 },
      eval: { everyVersions: 3, episodesPerTask: 4, gateEveryVersions: 0 },
      env: { kind: 'simulated' },
    },
    { continueAsNewAfterIterations: 12 }
  );

  // 1. The status query answers while the campaign is still preparing (no "did not register a handler").
  const refused: string[] = [];
  const firstStatus = await waitFor('a first status', async () => {
    try {
      return await campaign.status();
    } catch (err) {
      refused.push(String(err));
      return undefined;
    }
  });
  assert.ok(firstStatus.campaignId === campaignId);
  assert.deepEqual(
    refused.filter((e) => /did not register a handler/.test(e)),
    [],
    'no query was refused for a missing handler'
  );

  // 2. Terminate a running task-group child: it never signals the campaign.
  const victim = await waitFor('a running task group', async () => {
    for await (const wf of cluster.client.temporal.workflow.list({
      query: `WorkflowType = 'taskGroupWorkflow' AND ExecutionStatus = 'Running'`,
    })) {
      if (wf.workflowId.startsWith(`${campaignId}-g`)) return wf.workflowId;
    }
    return undefined;
  });
  const before = await campaign.status();
  await cluster.client.temporal.workflow.getHandle(victim).terminate('test: a child that dies without reporting');

  // 3. Kill one policy server for good (no restart) once training is under way.
  await waitFor('a first train step', async () => (await campaign.status()).trainSteps >= 1);
  const dead = cluster.workers.children.find((c) => c.name === 'policy-p1')!;
  dead.process.kill('SIGKILL');

  const result = await campaign.result();
  const status = await campaign.status();
  assert.equal(result.trainSteps, 10);
  assert.ok(status.runIndex >= 1, `continue-as-new happened (run ${status.runIndex})`);
  assert.equal(status.groupsInFlight, 0, 'nothing is left in flight');
  assert.ok(status.infraFailures >= before.infraFailures + 2, 'the terminated group counts as lost episodes');
  const lost = await cluster.store.getJson(keys.discardRecord(campaignId, victim, 'lost'), DiscardRecordSchema);
  assert.ok(lost.trajectories.length >= 2 && lost.trajectories.every((t) => t.reason === 'lost-infra'));
  assert.equal(status.rolledBack, 0, 'a dead server is dropped, not a reason to roll back');
  assert.deepEqual(Object.keys(status.servedVersions), ['p0'], 'the dead server is gone from the served list');
  assert.equal(status.servedVersions.p0, result.policyVersion, 'the last trained version is served');
  assert.equal(result.finalEval?.version, result.policyVersion, 'and evaluated');
});
