/**
 * A scheduler shard must start the groups assigned to it while its loop awaits something else (here the
 * reconcile of an earlier run's child). Before the fix the loop cleared its wake flag after that await, so
 * such groups sat in the shard's queue until some later signal or timer came, and for good when none did:
 * seen at 512 envs, where 109 assigned groups (803 episodes) were never started and the campaign counted
 * them in flight until its 15-minute sharded reconcile. Real dev server (a scratch namespace), the real
 * workflow code on the orchestrator queue, and a describeChildren activity the test holds open.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { temporal } from '@temporalio/proto';
import type { ChildDescription } from '../../activities/data/children';
import { payloadGuardInterceptors } from '../../infra/payload-guard';
import { connectClient } from '../../infra/temporal-connection';
import { registerScratchNamespace } from '../../infra/services';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { orchestratorWorkflowCode } from '../../workers/workflow-bundle';
import type { RolloutLaneInput } from '../../workflows/rollout-lane';
import type { RolloutShardInput } from '../../workflows/rollout-shard';
import type { TaskGroupInput } from '../../workflows/task-group';
import { testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker } from '../helpers/temporal';
import { waitFor } from '../helpers/wait';

const EventType = temporal.api.enums.v1.EventType;

test('a group assigned while the shard awaits a reconcile is started once the reconcile returns', async () => {
  const settings = await registerScratchNamespace(testSettings(), `dartflow-test-shard-wake-${uniqueSuffix()}`);
  let describeCalled = false;
  let releaseDescribe!: () => void;
  const released = new Promise<void>((resolve) => (releaseDescribe = resolve));
  const { workflowInterceptors, ...workflowCode } = orchestratorWorkflowCode();
  const worker = await createTestWorker(settings, {
    taskQueue: TASK_QUEUES.orchestrator,
    ...workflowCode,
    interceptors: payloadGuardInterceptors({ workflows: workflowInterceptors }),
    activities: {
      // The earlier run's child: held open until the test has assigned a group, then reported terminated.
      async describeChildren(input: { workflowIds: string[] }): Promise<ChildDescription[]> {
        describeCalled = true;
        await released;
        return input.workflowIds.map((workflowId) => ({ workflowId, status: 'TERMINATED' as const }));
      },
    },
  });
  const client = await connectClient(settings);
  const suffix = uniqueSuffix();
  const shardId = `shard-wake-${suffix}`;
  const group: TaskGroupInput = {
    campaignId: `wake-${suffix}`,
    groupId: `wake-${suffix}-g000001`,
    task: { id: 'click-target-1' },
    seed: 1,
    n: 2,
    maxSteps: 1,
    policy: { kind: 'embedded', endpoints: [], temperature: 1 },
    experiencePool: false,
    poolWanted: 0,
  };
  const input: RolloutShardInput = {
    campaignId: group.campaignId,
    campaignWorkflowId: `campaign-wake-${suffix}`,
    // No flush and no reconcile timer can wake the loop within the test: only the assigned group's signal.
    flushMs: 3_600_000,
    maxBatch: 100,
    reconcileAfterMs: 0,
    reconcileEveryMs: 100,
    carried: {
      runIndex: 1,
      inFlight: { [`wake-${suffix}-g000000`]: { run: 0, startedAtMs: 0 } },
      queued: [],
      outbox: { finished: [], lost: [] },
      stopRequested: false,
      groupsStarted: 1,
    },
  };
  try {
    await worker.runUntil(async () => {
      const shard = await client.workflow.start('rolloutShardWorkflow', {
        taskQueue: TASK_QUEUES.orchestrator,
        workflowId: shardId,
        args: [input],
      });
      await waitFor('the reconcile of the earlier run to start', async () => describeCalled, 60_000);
      await shard.signal('assignGroups', [group]);
      await waitFor(
        'the assignment in the shard history',
        async () =>
          (await shard.fetchHistory()).events?.some(
            (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'assignGroups'
          ),
        60_000
      );
      releaseDescribe();
      // The shard runs its groups in rollout lanes: the group is started as part of a new lane's input.
      const converter = client.options.loadedDataConverter.payloadConverter;
      const started = await waitFor(
        'the assigned group to be started',
        async () =>
          (await shard.fetchHistory()).events?.find((e) => {
            const a = e.startChildWorkflowExecutionInitiatedEventAttributes;
            if (e.eventType !== EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED || !a) return false;
            const laneInput = converter.fromPayload<RolloutLaneInput>(a.input!.payloads![0]!);
            return laneInput.groups.some((g) => g.groupId === group.groupId);
          }),
        60_000
      ).catch(() => undefined);
      await shard.terminate('test done').catch(() => undefined);
      const laneId = started?.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      if (laneId)
        await client.workflow
          .getHandle(laneId)
          .terminate('test done')
          .catch(() => undefined);
      assert.ok(started, 'the group assigned during the reconcile was started (before the fix it waited forever)');
    });
  } finally {
    await client.connection.close();
  }
});
