/**
 * From a real VLM rollout to a real VLM train step, with nothing hand-made in between: a tiny Qwen2-VL
 * (built offline) served by vLLM behind the dartflow front (workers/vllm-policy-server.ts), two UI-TARS
 * episodes of one group on a Chromium task through the env activity (runEpisodeCore, vlm/uitars-policy.ts),
 * then the Python trainer worker (python/dartflow_vlm/worker.py) trains a step from exactly the stored
 * trajectories. Asserts:
 * - every step record carries `responseTokenIds` (one per vLLM logprob) and a `promptKey` whose
 *   content-addressed object is a valid prompt record holding the history as sent (screenshots inline);
 * - transformers re-scoring the stored prompt and token ids gives vLLM's recorded logprobs (the record is
 *   exactly what vLLM sampled from);
 * - trainStep on the trainer's queue trains on every stored step (none skipped) and changes the weights.
 * The rewards in the train step's group refs are set to 1 and 0: a random-init model never solves the
 * task, and equal rewards give zero GRPO advantages (no gradient). Skips without the VLM venv.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { builtinPolicies } from '../../activities/env/policies';
import { runEpisodeCore, type EpisodeHooks } from '../../activities/env/run-episode';
import type { RunEpisodeResult } from '../../activities/env/input';
import type { TrainGroupRef } from '../../activities/trainer/types';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { registerScratchNamespace } from '../../infra/services';
import { downloadHfCheckpoint, readHfManifest } from '../../rollout/vllm/hf-checkpoint';
import { StepRecordSchema, TrajectoryManifestSchema, type StepRecord } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { sha256Hex, type ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { addBoxTokens } from '../../vlm/prompt';
import { PromptRecordSchema, type PromptRecord } from '../../vlm/prompt-record';
import { uiTarsPolicyFactory } from '../../vlm/uitars-policy';
import { startVllmPolicyServer, type VllmPolicyServerHandle } from '../../workers/vllm-policy-server';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { testTaskQueue } from '../helpers/temporal';
import { buildTinyModel, scoreInTransformers, SKIP_REASON, specialTokenIds } from '../vlm-infra/helpers';
import {
  changedTensors,
  startActivityCaller,
  startPythonTrainer,
  type ActivityCaller,
  type PythonTrainer,
} from './python-trainer';

const CAMPAIGN = 'vlm-episode-train';
const TOKEN = 'test-token-0123456789abcdef';
const SERVER = `vet-${uniqueSuffix()}`;
const GROUP = 'g-click-target';
const MAX_STEPS = 2;
/** Re-scoring in transformers against vLLM's logprobs (both float32 on CPU). */
const TOLERANCE = 1e-3;

describe('a VLM episode through vLLM stores what the Python trainer trains on', { skip: SKIP_REASON }, () => {
  let tmp: string;
  let modelDir: string;
  let store: ObjectStore;
  let cleanup: (() => Promise<void>) | undefined;
  let server: VllmPolicyServerHandle | undefined;
  let pool: BrowserEnvPool | undefined;
  let trainer: PythonTrainer | undefined;
  let caller: ActivityCaller | undefined;
  const trainerQueue = testTaskQueue('vlm-trainer-e2e');
  const results: RunEpisodeResult[] = [];
  const steps = new Map<string, StepRecord[]>();

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-vlm-episode-'));
    modelDir = path.join(tmp, 'tiny');
    await buildTinyModel(modelDir, 0);
    ({ store, cleanup } = await freshBucket('vlm-episode'));
    const base = testSettings();
    const settings = {
      ...(await registerScratchNamespace(base, `dartflow-test-vlm-ep-${uniqueSuffix()}`)),
      s3: { ...base.s3, bucket: store.bucket },
    };
    server = await startVllmPolicyServer({
      settings,
      serverId: SERVER,
      token: TOKEN,
      store,
      vllm: { kind: 'start', maxModelLen: 4096 },
      initial: { modelDir, version: 0, campaignId: CAMPAIGN },
      cacheDir: path.join(tmp, 'cache'),
      announce: false,
    });
    pool = new BrowserEnvPool({ slots: 1 });
    trainer = await startPythonTrainer({
      baseModel: modelDir,
      workDir: path.join(tmp, 'work'),
      bucket: store.bucket,
      queue: trainerQueue,
    });
    caller = await startActivityCaller(testSettings());
  });

  after(async () => {
    await caller?.close();
    await trainer?.stop();
    await pool?.close();
    await server?.shutdown();
    await cleanup?.();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('records responseTokenIds and a content-addressed promptKey on every step', async () => {
    const hooks: EpisodeHooks = { heartbeat: () => undefined, attempt: 1 };
    // Vision special tokens in a response cannot be re-scored (the processor counts them as image slots).
    const logitBias = Object.fromEntries(specialTokenIds(modelDir).map((id) => [String(id), -100]));
    for (const t of [0, 1]) {
      results.push(
        await runEpisodeCore(
          { pool: pool!, store, policies: { ...builtinPolicies(), uitars: uiTarsPolicyFactory({ apiKey: TOKEN }) } },
          {
            campaignId: CAMPAIGN,
            groupId: GROUP,
            trajectoryId: `${GROUP}-t${t}`,
            task: loadTask('click-target'),
            seed: 5,
            maxSteps: MAX_STEPS,
            policy: {
              kind: 'uitars',
              endpoints: [server!.url],
              temperature: 1,
              options: {
                model: 'dartflow',
                maxTokens: 10,
                topLogprobs: 2,
                minPixels: 4 * 28 * 28,
                maxPixels: 16 * 28 * 28,
                logitBias,
              },
            },
          },
          hooks
        )
      );
    }
    for (const r of results) {
      assert.equal(r.status, 'ok', JSON.stringify(r));
      assert.equal(r.numSteps, MAX_STEPS, 'a random model does not finish the task');
      const manifest = await store.getJson(r.manifestKey, TrajectoryManifestSchema);
      const recorded = await store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
      steps.set(r.trajectoryId, recorded);
      for (const s of recorded) {
        assert.ok(s.responseTokenIds && s.responseTokenIds.length > 0, `step ${s.step}: no responseTokenIds`);
        assert.equal(s.responseTokenIds.length, s.tokenLogProbs?.length, 'one token id per vLLM logprob');
        assert.equal(s.policyVersion, 0);
        assert.match(s.promptKey ?? '', /^prompts\/[0-9a-f]{64}\.json$/);
        const body = await store.getBytes(s.promptKey!);
        assert.equal(keys.vlmPrompt(sha256Hex(body)), s.promptKey, 'the key is the sha256 of the stored bytes');
        const prompt: PromptRecord = PromptRecordSchema.parse(JSON.parse(body.toString('utf8')));
        const images = prompt.messages.flatMap((m) =>
          typeof m.content === 'string' ? [] : m.content.filter((p) => p.type === 'image_url')
        );
        assert.equal(images.length, s.step + 1, 'every screenshot so far, inline');
        const assistant = prompt.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
        assert.deepEqual(
          assistant,
          recorded.slice(0, s.step).map((p) => addBoxTokens(p.actionText)),
          'the past answers as the model gave them'
        );
      }
    }
  });

  it('transformers re-scoring the stored prompt and token ids gives the recorded vLLM logprobs', async () => {
    const all = [...steps.values()].flat();
    const requests = await Promise.all(
      all.map(async (s) => ({
        messages: PromptRecordSchema.parse(JSON.parse((await store.getBytes(s.promptKey!)).toString('utf8'))).messages,
        completion_token_ids: s.responseTokenIds!,
      }))
    );
    const scored = await scoreInTransformers(modelDir, requests);
    all.forEach((s, i) => {
      const diff = Math.max(...scored[i]!.logprobs.map((x, j) => Math.abs(x - s.tokenLogProbs![j]!)));
      assert.ok(diff < TOLERANCE, `${s.trajectoryId} step ${s.step}: max |Δ logprob| ${diff}`);
    });
  });

  it('the Python trainer trains a step from exactly those rollouts and the weights change', async () => {
    const group: TrainGroupRef = {
      groupId: GROUP,
      taskId: 'click-target',
      trajectories: results.map((r, i) => ({
        trajectoryId: r.trajectoryId,
        manifestKey: r.manifestKey,
        reward: i === 0 ? 1 : 0,
        injectedFromPool: false,
      })),
    };
    const result = await caller!.call(trainerQueue, 'trainStep', {
      campaignId: CAMPAIGN,
      trainStep: 1,
      fromVersion: 0,
      groups: [group],
      trainer: { learningRate: 1e-2, klBeta: 0.05 },
      maxStaleness: 1,
      policy: { seed: 0, width: 1 },
    });
    assert.equal(result.version, 1);
    assert.equal(result.reused, false);
    // Every stored step was loaded and trained on (top-80 % entropy selection picks among them).
    assert.equal(result.metrics.skippedSteps, 0, JSON.stringify(result.metrics));
    assert.equal(result.metrics.skippedGroups, 0, JSON.stringify(result.metrics));
    assert.equal(result.metrics.samples, 2 * MAX_STEPS, JSON.stringify(result.metrics));
    assert.ok(Number.isFinite(result.metrics.loss), JSON.stringify(result.metrics));
    const manifest = await readHfManifest(store, CAMPAIGN, 1);
    assert.equal(manifest.parentVersion, 0);
    const dir = path.join(tmp, 'v1');
    await downloadHfCheckpoint(store, manifest, dir);
    const { tensors, changed } = await changedTensors(dir, modelDir);
    assert.ok(tensors > 0 && changed > 0, `changed ${changed} of ${tensors} tensors`);
  });
});
