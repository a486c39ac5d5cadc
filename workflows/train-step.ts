/**
 * trainStepWorkflow — one train step as a child of the campaign (ABANDON): runs the `trainStep` activity
 * on the trainer queue (a VLM campaign's: the Python trainer's) and reports the outcome to the campaign by
 * workflow id. Because the step lives in its own workflow, the campaign can continue-as-new while a long (DART-sized, minutes) step runs: the
 * step's ref travels in the carried state and its signal reaches the campaign's latest run.
 */
import { getExternalWorkflowHandle, log, workflowInfo } from '@temporalio/workflow';
import type { TrainStepInput } from '../activities/trainer/types';
import { trainerActivitiesOn, trainerHeartbeatMs } from './activity-proxies';
import { trainStepFinishedSignal, type TrainStepOutcome } from './messages';

export interface TrainStepWorkflowInput {
  /** Workflow id of the campaign to report to; absent for a stand-alone step. */
  parentWorkflowId?: string;
  train: TrainStepInput;
  /**
   * The trainer's task queue (default TASK_QUEUES.trainer): a VLM campaign sets TASK_QUEUES.trainerVlm,
   * where the Python trainer polls. Absent in histories from before it existed: the default, as then.
   */
  trainerQueue?: string;
}

export async function trainStepWorkflow(input: TrainStepWorkflowInput): Promise<TrainStepOutcome> {
  const base = {
    workflowId: workflowInfo().workflowId,
    trainStep: input.train.trainStep,
    fromVersion: input.train.fromVersion,
  };
  let outcome: TrainStepOutcome;
  try {
    const r = await trainerActivitiesOn(input.trainerQueue, trainerHeartbeatMs(input.train.trainer)).trainStep(
      input.train
    );
    outcome = { ...base, ok: true, version: r.version, metrics: r.metrics };
  } catch (err) {
    // A refused step (NaN loss, bad batch, out of retries) keeps the previous checkpoint; the campaign goes on.
    log.error('train step failed; keeping the previous checkpoint', { error: String(err) });
    outcome = { ...base, ok: false, error: String(err).slice(0, 2000) };
  }
  if (input.parentWorkflowId) {
    try {
      await getExternalWorkflowHandle(input.parentWorkflowId).signal(trainStepFinishedSignal, outcome);
    } catch (err) {
      log.warn('campaign not reachable for the train step result', { error: String(err) });
    }
  }
  return outcome;
}
