/**
 * Routing a train step to the VLM trainer's queue: trainStepWorkflow runs `trainStep` on the queue its
 * input names (a VLM campaign sets TASK_QUEUES.trainerVlm), with the trainer's retry policy, and a
 * campaign's policy kind picks that queue. A stand-in activity on a private queue plays the trainer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { TrainStepInput, TrainStepResult } from '../../activities/trainer/types';
import { connectClient } from '../../infra/temporal-connection';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { trainerQueueOf } from '../../workflows/activity-proxies';
import type { TrainStepOutcome } from '../../workflows/messages';
import { testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';

describe('train steps reach the trainer queue their campaign names', () => {
  const settings = testSettings();
  const wfQueue = testTaskQueue('train-step-wf');
  const trainerQueue = testTaskQueue('trainer-vlm');
  const calls: TrainStepInput[] = [];
  let attempts = 0;
  let wfWorker: Worker;
  let trainer: Worker;
  let running: Promise<unknown>;
  let client: Client;

  before(async () => {
    wfWorker = await createTestWorker(settings, {
      taskQueue: wfQueue,
      workflowsPath: require.resolve('../../workflows/train-step'),
    });
    trainer = await createTestWorker(settings, {
      taskQueue: trainerQueue,
      activities: {
        trainStep(input: TrainStepInput): Promise<TrainStepResult> {
          calls.push(input);
          // The first attempt fails like a lost trainer: the proxy's retry policy applies on this queue too.
          if (attempts++ === 0) return Promise.reject(new Error('trainer lost'));
          return Promise.resolve({
            version: input.fromVersion + 1,
            manifestKey: 'k',
            ledgerKey: 'l',
            metrics: { loss: 0.25 },
            reused: false,
          });
        },
      },
    });
    running = Promise.all([wfWorker.run(), trainer.run()]);
    client = await connectClient(settings);
  });

  after(async () => {
    wfWorker.shutdown();
    trainer.shutdown();
    await running;
    await client.connection.close();
  });

  it('a VLM campaign trains on trainer-vlm, every other one on trainer', () => {
    assert.equal(trainerQueueOf('vlm'), TASK_QUEUES.trainerVlm);
    assert.equal(TASK_QUEUES.trainerVlm, 'trainer-vlm');
    assert.equal(trainerQueueOf('embedded'), TASK_QUEUES.trainer);
  });

  it('trainStepWorkflow runs trainStep on input.trainerQueue, retried there', async () => {
    const train = {
      campaignId: 'route',
      trainStep: 4,
      fromVersion: 3,
      groups: [],
      trainer: {},
      maxStaleness: 1,
      policy: { seed: 0, width: 1 },
    } as unknown as TrainStepInput;
    const outcome = (await client.workflow.execute('trainStepWorkflow', {
      taskQueue: wfQueue,
      workflowId: `route-${uniqueSuffix()}`,
      args: [{ train, trainerQueue }],
    })) as TrainStepOutcome;
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
    assert.equal(outcome.ok && outcome.version, 4);
    assert.equal(calls.length, 2, 'one failed attempt, one retry, both on the private trainer queue');
    assert.deepEqual(calls[1], train);
  });
});
