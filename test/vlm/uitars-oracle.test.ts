/**
 * The UI-TARS demonstration policy (`uitars-oracle`, vlm/uitars-oracle-policy.ts) that a VLM campaign's
 * behaviour-cloning warm start samples with, on a real Chromium task through the env activity:
 * - every step is a UI-TARS turn (`Thought: …\nAction: click(start_box='(x,y)')`) in the configured
 *   convention (smart-resized pixels, or 0–1000 with `coordModel: 'ui-tars'`) and solves the task;
 * - every step names a stored prompt record, and the first one is byte-identical to the one the `uitars`
 *   policy sends for the same screen and options (so BC trains on the prompt RL samples from);
 * - the Python trainer's behaviourClone trains on those demonstrations (its tokenizer turns actionText into
 *   token ids), skips none, and changes the weights (skipped without the VLM venv).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { builtinPolicies } from '../../activities/env/policies';
import { runEpisodeCore, type EpisodeHooks } from '../../activities/env/run-episode';
import type { RunEpisodeInput, RunEpisodeResult } from '../../activities/env/input';
import { BrowserEnvPool } from '../../envs/browser/pool';
import { downloadHfCheckpoint, readHfManifest } from '../../rollout/vllm/hf-checkpoint';
import { rolloutPolicyFactories } from '../../rollout/factories';
import { StepRecordSchema, TrajectoryManifestSchema, type StepRecord } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';
import { addBoxTokens, computerUsePrompt } from '../../vlm/prompt';
import { PromptRecordSchema, promptRecordObject, type PromptRecord } from '../../vlm/prompt-record';
import type { ChatMessage } from '../../vlm/prompt';
import { freshBucket, testSettings } from '../helpers/infra';
import { testTaskQueue } from '../helpers/temporal';
import { buildTinyModel, SKIP_REASON } from '../vlm-infra/helpers';
import { startFakeOpenAI, type FakeServer } from './fake-openai';
import { changedTensors, startActivityCaller, startPythonTrainer } from './python-trainer';

const CAMPAIGN = 'uitars-oracle';
const OPTIONS = { model: 'dartflow', minPixels: 4 * 28 * 28, maxPixels: 16 * 28 * 28 };

describe('uitars-oracle: UI-TARS demonstrations with the prompt the VLM is sampled with', () => {
  let tmp: string;
  let store: ObjectStore;
  let cleanup: (() => Promise<void>) | undefined;
  let pool: BrowserEnvPool | undefined;
  let fake: FakeServer | undefined;
  const demos: RunEpisodeResult[] = [];
  const steps = new Map<string, StepRecord[]>();
  const hooks: EpisodeHooks = { heartbeat: () => undefined, attempt: 1 };
  const deps = () => ({
    pool: pool!,
    store,
    policies: { ...builtinPolicies(), ...rolloutPolicyFactories({ dataDir: tmp }) },
  });
  const input = (id: string, seed: number, kind: string, options: Record<string, unknown>): RunEpisodeInput => ({
    campaignId: CAMPAIGN,
    groupId: 'demo-g0',
    trajectoryId: id,
    task: loadTask('click-target'),
    seed,
    policy: { kind, endpoints: kind === 'uitars' ? [fake!.url] : [], temperature: 1, options },
    source: 'demo',
  });
  const stepsOf = async (r: RunEpisodeResult): Promise<StepRecord[]> => {
    const manifest = await store.getJson(r.manifestKey, TrajectoryManifestSchema);
    assert.equal(manifest.source, 'demo');
    return store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
  };
  const promptOf = async (key: string): Promise<PromptRecord> =>
    PromptRecordSchema.parse(JSON.parse((await store.getBytes(key)).toString('utf8')));

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-uitars-oracle-'));
    ({ store, cleanup } = await freshBucket('uitars-oracle'));
    pool = new BrowserEnvPool({ slots: 1 });
    fake = await startFakeOpenAI();
  });

  after(async () => {
    await fake?.close();
    await pool?.close();
    await cleanup?.();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('demonstrates in smart-resized pixels, solves the task and stores a prompt record per step', async () => {
    for (const seed of [3, 4]) {
      const r = await runEpisodeCore(deps(), input(`demo-px-${seed}`, seed, 'uitars-oracle', OPTIONS), hooks);
      assert.equal(r.status, 'ok', JSON.stringify(r));
      assert.equal(r.reward, 1, `seed ${seed}: the oracle's demonstration solves the task`);
      demos.push(r);
      const recorded = await stepsOf(r);
      steps.set(r.trajectoryId, recorded);
      assert.ok(recorded.length >= 1);
      for (const s of recorded) {
        assert.equal(s.policyServer, 'uitars-oracle');
        assert.equal(s.responseTokenIds, undefined, 'the trainer tokenizes demonstrations itself');
        if (s.action?.type === 'click') {
          const m = /^Thought: \nAction: click\(start_box='\((\d+),(\d+)\)'\)$/.exec(s.actionText);
          assert.ok(m, `a UI-TARS click without box tokens: ${JSON.stringify(s.actionText)}`);
        }
        assert.match(s.promptKey ?? '', /^prompts\/[0-9a-f]{64}\.json$/);
        const prompt = await promptOf(s.promptKey!);
        const first = prompt.messages[1]!;
        assert.equal(first.role, 'user');
        assert.ok(Array.isArray(first.content) && first.content[0]?.type === 'text');
        assert.ok(first.content[0].text.startsWith(computerUsePrompt('').split('\n')[0]!), 'the UI-TARS template');
        const images = prompt.messages.flatMap((m) =>
          typeof m.content === 'string' ? [] : m.content.filter((p) => p.type === 'image_url')
        );
        assert.equal(images.length, s.step + 1, 'every screenshot so far, inline');
        assert.deepEqual(
          prompt.messages.filter((m) => m.role === 'assistant').map((m) => m.content),
          recorded.slice(0, s.step).map((p) => addBoxTokens(p.actionText)),
          'the past demonstrated turns as history, with box tokens'
        );
      }
    }
  });

  it('writes 0–1000 coordinates with coordModel ui-tars and still solves the task', async () => {
    const r = await runEpisodeCore(
      deps(),
      input('demo-rel-3', 3, 'uitars-oracle', { ...OPTIONS, coordModel: 'ui-tars' }),
      hooks
    );
    assert.equal(r.status, 'ok', JSON.stringify(r));
    assert.equal(r.reward, 1);
    const [pixels] = steps.get('demo-px-3')!;
    const [relative] = await stepsOf(r);
    assert.equal(relative!.action?.type, 'click');
    const m = /start_box='\((\d+),(\d+)\)'/.exec(relative!.actionText);
    assert.ok(m && Number(m[1]) <= 1000 && Number(m[2]) <= 1000, relative!.actionText);
    assert.notEqual(relative!.actionText, pixels!.actionText, 'another convention, another text');
    assert.equal(relative!.promptKey, pixels!.promptKey, 'the same screen and prompt');
  });

  it("a demonstration's prompt is byte-identical to the uitars policy's request on the same screen", async () => {
    fake!.fallback = { kind: 'completion', text: 'Thought: \nAction: wait()' };
    const r = await runEpisodeCore(
      deps(),
      { ...input('sampled-3', 3, 'uitars', OPTIONS), maxSteps: 1, source: 'rollout' } as RunEpisodeInput,
      hooks
    );
    assert.equal(r.status, 'ok', JSON.stringify(r));
    const sent = fake!.requests[0]!.messages as ChatMessage[];
    const [demo] = steps.get('demo-px-3')!;
    assert.equal(promptRecordObject(sent).key, demo!.promptKey);
  });

  it(
    'the Python trainer clones the demonstrations: no step skipped, the weights change',
    { skip: SKIP_REASON },
    async () => {
      const modelDir = path.join(tmp, 'tiny');
      await buildTinyModel(modelDir, 0);
      const queue = testTaskQueue('vlm-bc');
      const trainer = await startPythonTrainer({
        baseModel: modelDir,
        workDir: path.join(tmp, 'work'),
        bucket: store.bucket,
        queue,
      });
      // The Python worker keeps this test process alive: it is stopped even when the caller cannot start.
      let caller: Awaited<ReturnType<typeof startActivityCaller>> | undefined;
      try {
        caller = await startActivityCaller(testSettings());
        const result = await caller.call(queue, 'behaviourClone', {
          campaignId: CAMPAIGN,
          trainStep: 1,
          fromVersion: 0,
          demos: [
            {
              groupId: 'demo-g0',
              taskId: 'click-target',
              trajectories: demos.map((d) => ({
                trajectoryId: d.trajectoryId,
                manifestKey: d.manifestKey,
                reward: 1,
                injectedFromPool: false,
              })),
            },
          ],
          epochs: 2,
          learningRate: 1e-2,
          minibatchSize: 4,
          policy: { seed: 0, width: 1 },
        });
        assert.equal(result.version, 1, trainer.log().slice(-2000));
        const demoSteps = [...steps.values()].flat().length;
        assert.equal(result.metrics.samples, demoSteps, JSON.stringify(result.metrics));
        const manifest = await readHfManifest(store, CAMPAIGN, 1);
        const dir = path.join(tmp, 'v1');
        await downloadHfCheckpoint(store, manifest, dir);
        const { tensors, changed } = await changedTensors(dir, modelDir);
        assert.ok(tensors > 0 && changed > 0, `changed ${changed} of ${tensors} tensors`);
      } finally {
        await caller?.close();
        await trainer.stop();
      }
    }
  );
});
