/**
 * The trainer rebuilds the `prev` input from a trajectory's steps.jsonl exactly as the rollout fed it:
 * the step before's action index, and "changed" = the screenshot key (its content hash) differs.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadTrainSamples } from '../../activities/trainer/samples';
import type { TrainGroupRef } from '../../activities/trainer/types';
import { tokenIndex } from '../../policy/action-space';
import { encodePreviousAction } from '../../policy/observation';
import { defaultPolicySpec as spec, legacyPolicySpec } from '../../policy/spec';
import {
  StepRecordSchema,
  TrajectoryManifestSchema,
  type StepRecord,
  type TrajectoryManifest,
} from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';
import { boxPng } from '../trainer/fixtures';

let store: ObjectStore;
let cleanup: () => Promise<void>;
before(async () => ({ store, cleanup } = await freshBucket('prev')));
after(() => cleanup());

/** One trajectory: click 5 (screen unchanged) → click 7 (screen changes) → key_enter. */
async function writeTrajectory(): Promise<TrainGroupRef> {
  const campaignId = 'prev-c';
  const trajectoryId = 'prev-t';
  const a = await store.putScreenshot(boxPng(0, 0, [200, 0, 0]));
  const b = await store.putScreenshot(boxPng(80, 80, [200, 0, 0]));
  const actions = [5, 7, tokenIndex(spec, 'key_enter')];
  const shots = [a.key, a.key, b.key];
  const steps: StepRecord[] = actions.map((actionIndex, step) => ({
    schemaVersion: 1,
    trajectoryId,
    step,
    observationKey: shots[step]!,
    observationSize: { width: 160, height: 160 },
    action: { type: 'wait' },
    actionText: 'x',
    actionIndex,
    behaviourLogProb: -1,
    entropy: 1,
    policyVersion: 0,
    actionOk: true,
    startedAt: 0,
    endedAt: 0,
  }));
  const stepsRef = await store.putJsonLines(keys.trajectorySteps(campaignId, trajectoryId), steps, StepRecordSchema);
  const manifest: TrajectoryManifest = {
    schemaVersion: 1,
    trajectoryId,
    campaignId,
    taskId: 'synthetic',
    groupId: 'g',
    seed: 0,
    instruction: 'press enter',
    fields: [],
    reward: 1,
    status: 'ok',
    numSteps: 3,
    maxSteps: 3,
    minPolicyVersion: 0,
    maxPolicyVersion: 0,
    stepsKey: keys.trajectorySteps(campaignId, trajectoryId),
    stepsSha256: stepsRef.sha256,
    source: 'rollout',
    envKind: 'synthetic',
    createdAt: 0,
  };
  const manifestKey = keys.trajectoryManifest(campaignId, trajectoryId);
  await store.putJson(manifestKey, manifest, TrajectoryManifestSchema);
  return {
    groupId: 'g',
    taskId: 'synthetic',
    trajectories: [{ trajectoryId, manifestKey, reward: 1, injectedFromPool: false }],
  };
}

test('loadTrainSamples: prev is zero at step 0, then the step before with its changed flag', async () => {
  const group = await writeTrajectory();
  const { samples } = await loadTrainSamples(store, spec, [group]);
  assert.deepEqual(
    samples.map((s) => s.action),
    [5, 7, tokenIndex(spec, 'key_enter')]
  );
  assert.deepEqual(samples[0]!.prev, encodePreviousAction(null, spec));
  assert.deepEqual(samples[1]!.prev, encodePreviousAction({ actionIndex: 5, changed: false }, spec));
  assert.deepEqual(samples[2]!.prev, encodePreviousAction({ actionIndex: 7, changed: true }, spec));
  // A spec without the input gets no prev rows at all.
  const legacy = await loadTrainSamples(store, legacyPolicySpec, [group]);
  assert.ok(legacy.samples.every((s) => s.prev === undefined));
});
