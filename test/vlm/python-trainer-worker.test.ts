/**
 * The Python VLM trainer as a Temporal worker (python/dartflow_vlm/worker.py) against the real dev server
 * and MinIO that `npm test` starts: a tiny Qwen2-VL built offline, a trajectory set whose token ids and
 * logprobs come from that model, `trainStep` executed through a Temporal client by a workflow on the
 * Python worker's private queue. Asserts: the weights changed and the checkpoint folder (downloaded by
 * the vLLM role's own reader, rollout/vllm/hf-checkpoint.ts) loads with transformers; a retried call with
 * the same step returns the same result without a second checkpoint; a bad input fails at once,
 * non-retryably, naming the field. Skips without the VLM venv (`bash infra/install-vlm.sh`).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { TrainGroupRef, TrainStepResult } from '../../activities/trainer/types';
import { downloadHfCheckpoint, readHfManifest } from '../../rollout/vllm/hf-checkpoint';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket, testSettings } from '../helpers/infra';
import { testTaskQueue } from '../helpers/temporal';
import { buildTinyModel, scoreInTransformers, screenshotPng, SKIP_REASON } from '../vlm-infra/helpers';
import {
  changedTensors,
  startActivityCaller,
  startPythonTrainer,
  type ActivityCaller,
  type PythonTrainer,
} from './python-trainer';

const CAMPAIGN = 'py-trainer';
const settings = testSettings();

describe('Python VLM trainer worker (Temporal + MinIO + torch)', { skip: SKIP_REASON }, () => {
  let store: ObjectStore;
  let cleanupBucket: () => Promise<void>;
  let tmp: string;
  let modelDir: string;
  let trainer: PythonTrainer | undefined;
  let caller: ActivityCaller | undefined;
  let groups: TrainGroupRef[];
  const trainerQueue = testTaskQueue('vlm-trainer');

  const call = (name: string, input: unknown): Promise<TrainStepResult> => caller!.call(trainerQueue, name, input);

  /** One step per trajectory: a screenshot prompt, 8-20 token ids, the model's own logprobs as vLLM's. */
  async function writeTrajectories(): Promise<TrainGroupRef[]> {
    const messages = (text: string) => [
      { role: 'system', content: 'You are a helpful assistant.' },
      {
        role: 'user',
        content: [
          { type: 'text', text },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${screenshotPng().toString('base64')}` } },
        ],
      },
    ];
    const out: TrainGroupRef[] = [];
    for (let g = 0; g < 2; g++) {
      const prompt = { schemaVersion: 1, messages: messages(`Click the red box ${g}`) };
      const promptBytes = Buffer.from(JSON.stringify(prompt));
      const promptKey = `prompts/${createHash('sha256').update(promptBytes).digest('hex')}.json`;
      await store.putBytes(promptKey, promptBytes, 'application/json');
      const tokens = [0, 1].map((t) =>
        Array.from({ length: 8 + 12 * t }, (_, i) => 60 + ((g * 31 + t * 17 + i * 7) % 300))
      );
      const scored = await scoreInTransformers(
        modelDir,
        tokens.map((ids) => ({ messages: prompt.messages, completion_token_ids: ids }))
      );
      const trajectories: TrainGroupRef['trajectories'] = [];
      for (let t = 0; t < 2; t++) {
        const trajectoryId = `traj-${g}-${t}`;
        const logprobs = scored[t]!.logprobs.map((x) => x + (t ? 0.2 : -0.2));
        const now = Date.now();
        const step = {
          schemaVersion: 1,
          trajectoryId,
          step: 0,
          observationKey: 'screenshots/none.png',
          observationSize: { width: 320, height: 200 },
          action: { type: 'click', x: 0.25, y: 0.35 },
          actionText: "click(start_box='(80,70)')",
          behaviourLogProb: logprobs.reduce((a, b) => a + b, 0),
          tokenLogProbs: logprobs,
          entropy: 1 + t,
          policyVersion: 0,
          actionOk: true,
          startedAt: now,
          endedAt: now,
          // The VLM extension the Python trainer re-scores from (docs/vlm.md "The VLM trainer").
          responseTokenIds: tokens[t]!,
          promptKey,
        };
        StepRecordSchema.parse(step);
        const steps = await store.putJsonLines(keys.trajectorySteps(CAMPAIGN, trajectoryId), [step]);
        const reward = t === 0 ? 1 : 0;
        const manifest = TrajectoryManifestSchema.parse({
          schemaVersion: 1,
          trajectoryId,
          campaignId: CAMPAIGN,
          taskId: `task-${g}`,
          groupId: `group-${g}`,
          seed: g,
          instruction: `Click the red box ${g}`,
          reward,
          status: 'ok',
          numSteps: 1,
          maxSteps: 5,
          minPolicyVersion: 0,
          maxPolicyVersion: 0,
          stepsKey: steps.key,
          stepsSha256: steps.sha256,
          source: 'rollout',
          envKind: 'browser',
          createdAt: now,
        });
        const manifestKey = keys.trajectoryManifest(CAMPAIGN, trajectoryId);
        await store.putJson(manifestKey, manifest);
        trajectories.push({ trajectoryId, manifestKey, reward, injectedFromPool: false });
      }
      out.push({ groupId: `group-${g}`, taskId: `task-${g}`, trajectories });
    }
    return out;
  }

  before(async () => {
    ({ store, cleanup: cleanupBucket } = await freshBucket('py-trainer'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'py-trainer-'));
    modelDir = path.join(tmp, 'tiny');
    await buildTinyModel(modelDir, 0);
    groups = await writeTrajectories();

    trainer = await startPythonTrainer({
      baseModel: modelDir,
      workDir: path.join(tmp, 'work'),
      bucket: store.bucket,
      queue: trainerQueue,
    });
    caller = await startActivityCaller(settings);
  });

  after(async () => {
    await caller?.close();
    await trainer?.stop();
    await cleanupBucket?.();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const input = () => ({
    campaignId: CAMPAIGN,
    trainStep: 1,
    fromVersion: 0,
    groups,
    trainer: { learningRate: 1e-2, klBeta: 0.05 },
    maxStaleness: 1,
    policy: { seed: 0, width: 1 },
  });

  let first: TrainStepResult;

  it('trainStep trains the tiny Qwen2-VL and writes an hf.json checkpoint that transformers loads', async () => {
    first = await call('trainStep', input());
    assert.equal(first.version, 1);
    assert.equal(first.reused, false);
    assert.equal(first.manifestKey, keys.hfCheckpointManifest(CAMPAIGN, 1));
    assert.ok(Number.isFinite(first.metrics.loss) && first.metrics.samples === 4, JSON.stringify(first.metrics));

    const manifest = await readHfManifest(store, CAMPAIGN, 1);
    assert.equal(manifest.kind, 'full');
    assert.equal(manifest.parentVersion, 0);
    const dir = path.join(tmp, 'v1');
    await downloadHfCheckpoint(store, manifest, dir);
    const { tensors, changed } = await changedTensors(dir, modelDir);
    assert.ok(tensors > 0 && changed > 0, `changed ${changed} of ${tensors} tensors`);
  });

  it('a retried step returns the same result and writes no second checkpoint', async () => {
    const again = await call('trainStep', input());
    assert.deepEqual(again, { ...first, reused: true });
    const hfManifests = (await store.list(keys.checkpointPrefix(CAMPAIGN))).filter((k) => k.endsWith('/hf.json'));
    assert.deepEqual(hfManifests, [keys.hfCheckpointManifest(CAMPAIGN, 1)]);
  });

  it('a bad input fails at once, non-retryably, naming the field', async () => {
    const err = await call('trainStep', { ...input(), trainStep: 2, groups: [] }).then(
      () => assert.fail('the bad input was accepted'),
      (e: unknown) => e
    );
    assert.ok(err instanceof WorkflowFailedError, String(err));
    const activityFailure = err.cause;
    assert.ok(activityFailure instanceof ActivityFailure, String(activityFailure));
    const cause = activityFailure.cause;
    assert.ok(cause instanceof ApplicationFailure, String(cause));
    assert.equal(cause.type, 'InvalidTrainInput');
    assert.equal(cause.nonRetryable, true);
    assert.match(cause.message, /invalid trainStep input: groups: /);
    const ledger = await store.exists(keys.ledgerEntry(CAMPAIGN, 2));
    assert.equal(ledger, false, 'nothing was committed for the refused step');
  });
});
