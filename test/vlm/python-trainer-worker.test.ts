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
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError, type Client } from '@temporalio/client';
import { bundleWorkflowCode, type Worker } from '@temporalio/worker';
import type { TrainGroupRef, TrainStepResult } from '../../activities/trainer/types';
import { PROJECT_ROOT } from '../../infra/settings';
import { connectClient } from '../../infra/temporal-connection';
import { downloadHfCheckpoint, readHfManifest } from '../../rollout/vllm/hf-checkpoint';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';
import { waitFor } from '../helpers/wait';
import {
  buildTinyModel,
  PYTHON,
  runPython,
  scoreInTransformers,
  screenshotPng,
  SKIP_REASON,
} from '../vlm-infra/helpers';

const CAMPAIGN = 'py-trainer';
const settings = testSettings();

/**
 * The only workflow the test needs: call an activity by name on a given queue with a retry policy, as the
 * campaign's proxies do. Written at run time (a workflow file must be bundled on its own) under the data
 * dir, inside the project, so the bundler resolves @temporalio/workflow from the project's node_modules.
 */
const WORKFLOW_SOURCE = `
import { proxyActivities } from '@temporalio/workflow';
export async function callActivity(queue: string, name: string, input: unknown): Promise<unknown> {
  const acts = proxyActivities<Record<string, (x: unknown) => Promise<unknown>>>({
    taskQueue: queue,
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '5 minutes',
    retry: { maximumAttempts: 4, initialInterval: '1 second' },
  });
  return acts[name]!(input);
}
`;

describe('Python VLM trainer worker (Temporal + MinIO + torch)', { skip: SKIP_REASON }, () => {
  let store: ObjectStore;
  let cleanupBucket: () => Promise<void>;
  let tmp: string;
  let modelDir: string;
  let python: ChildProcess | undefined;
  let pythonLog = '';
  let worker: Worker;
  let workerRun: Promise<void>;
  let client: Client;
  let groups: TrainGroupRef[];
  const trainerQueue = testTaskQueue('vlm-trainer');
  const workflowQueue = testTaskQueue('vlm-trainer-wf');

  async function call(name: string, input: unknown): Promise<TrainStepResult> {
    return (await client.workflow.execute('callActivity', {
      taskQueue: workflowQueue,
      workflowId: `py-trainer-${uniqueSuffix()}`,
      args: [trainerQueue, name, input],
    })) as TrainStepResult;
  }

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

    python = spawn(
      PYTHON!,
      [
        '-m',
        'dartflow_vlm.worker',
        '--base-model',
        modelDir,
        '--task-queue',
        trainerQueue,
        '--work-dir',
        path.join(tmp, 'work'),
      ],
      {
        cwd: PROJECT_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, S3_BUCKET: store.bucket, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
      }
    );
    python.stdout!.on('data', (d: Buffer) => (pythonLog += d.toString()));
    python.stderr!.on('data', (d: Buffer) => (pythonLog += d.toString()));
    await waitFor(
      'the Python trainer worker to be ready',
      () => Promise.resolve(pythonLog.includes('"ready": true') || python!.exitCode !== null),
      180_000
    );
    assert.ok(pythonLog.includes('"ready": true'), `the Python worker did not start:\n${pythonLog.slice(-3000)}`);

    const wfDir = path.join(settings.dataDir, 'tmp', `py-trainer-wf-${uniqueSuffix()}`);
    fs.mkdirSync(wfDir, { recursive: true });
    fs.writeFileSync(path.join(wfDir, 'workflow.ts'), WORKFLOW_SOURCE);
    const workflowBundle = await bundleWorkflowCode({ workflowsPath: path.join(wfDir, 'workflow.ts') });
    fs.rmSync(wfDir, { recursive: true, force: true });
    worker = await createTestWorker(settings, { taskQueue: workflowQueue, workflowBundle });
    workerRun = worker.run();
    client = await connectClient(settings);
  });

  after(async () => {
    worker?.shutdown();
    await workerRun?.catch(() => undefined);
    await client?.connection.close();
    if (python && python.exitCode === null) {
      python.kill('SIGTERM');
      await new Promise((r) => python!.once('exit', r));
    }
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
    const check = await runPython([
      '-c',
      [
        'import json, sys, torch',
        'from transformers import Qwen2VLForConditionalGeneration as M',
        'a = M.from_pretrained(sys.argv[1]).state_dict()',
        'b = M.from_pretrained(sys.argv[2]).state_dict()',
        'print(json.dumps({"tensors": len(a), "changed": sum(not torch.equal(a[k], b[k]) for k in a)}))',
      ].join('\n'),
      dir,
      modelDir,
    ]);
    const { tensors, changed } = JSON.parse(check.trim().split('\n').pop()!) as { tensors: number; changed: number };
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
