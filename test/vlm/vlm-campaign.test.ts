/**
 * A short VLM campaign end to end (issue 13.5), every part real: Temporal (a scratch namespace) and
 * MinIO (a fresh bucket), the orchestrator worker, a Chromium env worker on click-target, two vLLM
 * policy-server roles on the tiny Qwen2-VL built offline, and the Python trainer worker on `trainer-vlm`.
 * The campaign (`policy.kind: vlm`) clones UI-TARS demonstrations of the oracle (`uitars-oracle`),
 * pre-collects one UI-TARS success into the experience pool (curation.precollect: the demonstration
 * policy of policy.kind), then runs DART RL steps. Its UI-TARS options (logitBias, maxTokens, pixel
 * bounds, topLogprobs) come from the campaign config (policy.options); the env worker has no defaults.
 * Asserts:
 * - RL trajectories carry vLLM's per-token logprobs, the sampled token ids and the serving version, and
 *   their rewards are the env's (the task page's, recorded by the env activity);
 * - the BC warm start trains (its version's weights differ from v0) and an RL step changes the weights;
 * - RL steps train all-failed groups with the pooled demonstration in place of a failure (the random-init
 *   model never solves click-target; DART §3.4 c): the ledger names the injected trajectory, whose
 *   behaviour log-probs are absent (IS weight 1, as for the TypeScript trainer's demos);
 * - both servers serve the last version after the rolling reload (their fronts say so too);
 * - a refused reload rolls back: the second server is given a corrupt copy of v2 (its store corrupts
 *   that version's files), so the canary that loaded v2 is reloaded to v1, v2 is abandoned and the
 *   campaign trains on from v1.
 * Skips without the VLM venv.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { Worker } from '@temporalio/worker';
import { DartflowClient } from '../../client/dartflow-client';
import { registerScratchNamespace } from '../../infra/services';
import type { InfraSettings } from '../../infra/settings';
import { downloadHfCheckpoint, readHfManifest } from '../../rollout/vllm/hf-checkpoint';
import { LedgerEntrySchema, StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { sha256Hex, type ObjectStore } from '../../storage/object-store';
import { uiTarsOraclePolicyFactory } from '../../vlm/uitars-oracle-policy';
import { uiTarsPolicyFactory } from '../../vlm/uitars-policy';
import { createEnvWorker, type EnvWorkerHandle } from '../../workers/env-worker';
import { createOrchestratorWorker } from '../../workers/orchestrator-worker';
import { startVllmPolicyServer, type VllmPolicyServerHandle } from '../../workers/vllm-policy-server';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { buildTinyModel, scoreInTransformers, SKIP_REASON, specialTokenIds } from '../vlm-infra/helpers';
import { PromptRecordSchema } from '../../vlm/prompt-record';
import { changedTensors, startPythonTrainer, type PythonTrainer } from './python-trainer';

const TOKEN = 'test-token-vlm-campaign-0123456789';
const CAMPAIGN = `vlmc-${uniqueSuffix()}`;
/** The version the second server is handed corrupt (the first RL step's). */
const BAD_VERSION = 2;
const RESIZE = { minPixels: 4 * 28 * 28, maxPixels: 16 * 28 * 28 };

/** The store as the second server sees it: every file of BAD_VERSION's checkpoint reads as other bytes. */
function corruptingStore(store: ObjectStore, campaignId: string, version: number): ObjectStore {
  const marker = keys.hfCheckpointFile(campaignId, version, 'x').slice(0, -'x'.length);
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'getStream') {
        return async (key: string) =>
          key.includes(marker) ? Readable.from([Buffer.from('not the checkpoint')]) : target.getStream(key);
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe(
  'a VLM campaign: BC warm start from UI-TARS demos, DART RL through two vLLM servers',
  { skip: SKIP_REASON },
  () => {
    let tmp: string;
    let modelDir: string;
    let settings: InfraSettings;
    let store: ObjectStore;
    let cleanupBucket: (() => Promise<void>) | undefined;
    const servers: VllmPolicyServerHandle[] = [];
    let trainer: PythonTrainer | undefined;
    let orchestrator: Worker | undefined;
    let orchestratorRun: Promise<void> | undefined;
    let env: EnvWorkerHandle | undefined;
    let envRun: Promise<void> | undefined;
    let client: DartflowClient | undefined;
    let logitBias: Record<string, number> = {};

    before(async () => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-vlm-campaign-'));
      modelDir = path.join(tmp, 'tiny');
      await buildTinyModel(modelDir, 0);
      ({ store, cleanup: cleanupBucket } = await freshBucket('vlm-campaign'));
      const base = testSettings();
      const namespace = `dartflow-test-vlmc-${uniqueSuffix()}`;
      settings = {
        ...(await registerScratchNamespace(base, namespace)),
        dataDir: tmp,
        s3: { ...base.s3, bucket: store.bucket },
      };
      // One click-target task: a suite folder on the orchestrator's machine.
      const suite = path.join(tmp, 'suite');
      fs.mkdirSync(suite);
      fs.copyFileSync(
        path.resolve(__dirname, '../../tasks/defs/click-target.json'),
        path.join(suite, 'click-target.json')
      );
      // Both vLLM servers start together (the slow part: about a minute each on CPU).
      const started = await Promise.all(
        ['va', 'vb'].map((serverId) =>
          startVllmPolicyServer({
            settings,
            serverId,
            token: TOKEN,
            store: serverId === 'vb' ? corruptingStore(store, CAMPAIGN, BAD_VERSION) : store,
            vllm: { kind: 'start', maxModelLen: 4096 },
            initial: { modelDir, version: 0, campaignId: CAMPAIGN },
            cacheDir: path.join(tmp, 'cache', serverId),
          })
        )
      );
      servers.push(...started);
      trainer = await startPythonTrainer({
        baseModel: modelDir,
        workDir: path.join(tmp, 'trainer'),
        bucket: store.bucket,
        queue: TASK_QUEUES.trainerVlm,
        env: { TEMPORAL_NAMESPACE: namespace },
      });
      orchestrator = await createOrchestratorWorker(settings);
      orchestratorRun = orchestrator.run();
      logitBias = Object.fromEntries(specialTokenIds(modelDir).map((id) => [String(id), -100]));
      // No UI-TARS defaults on the env worker: the campaign's policy.options decide.
      env = await createEnvWorker({
        settings,
        poolConfig: { kind: 'browser', slots: 4 },
        policies: {
          uitars: uiTarsPolicyFactory({ apiKey: TOKEN }),
          'uitars-oracle': uiTarsOraclePolicyFactory(),
        },
      });
      envRun = env.run();
      client = await DartflowClient.connect(settings);
      settingsForTest.suite = suite;
    });

    after(async () => {
      await client?.close();
      env?.shutdown();
      await envRun?.catch(() => undefined);
      orchestrator?.shutdown();
      await orchestratorRun?.catch(() => undefined);
      await trainer?.stop();
      await Promise.all(servers.map((s) => s.shutdown()));
      await cleanupBucket?.();
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    const settingsForTest = { suite: '' };

    it('trains, rolls out to both servers, and rolls a refused version back', async () => {
      const campaign = await client!.startCampaign({
        // 4 steps: BC, v2 (refused), and whichever steps trained around the rollback (one from v2 that is
        // abandoned, or a second one from v1's line: DART trains while it rolls out, so either can come first).
        campaign: { id: CAMPAIGN, suite: settingsForTest.suite, maxTrainSteps: 4 },
        rollout: { envConcurrency: 4, maxSteps: 1, nMax: 4, nMin: 4, dynamicRollout: false, dynamicMaxSteps: false },
        curation: { groupSize: 4, experiencePool: true, precollect: true, precollectSuccessesPerTask: 1 },
        trainer: { minGroups: 1, maxGroups: 1, learningRate: 1e-2, weightDecay: 0.1 },
        policy: {
          kind: 'vlm',
          vlmModel: 'dartflow',
          // A random-init model must never answer with vision special tokens (the trainer could not re-score
          // them); responses stay short. Demonstrations and samples see the same prompt (same pixel bounds).
          options: { maxTokens: 8, topLogprobs: 2, logitBias, ...RESIZE },
          servers: 2,
          bcWarmStartEpisodes: 8,
          bcEpochs: 2,
        },
        eval: { everyVersions: 100, episodesPerTask: 1, gateEveryVersions: 0 },
        env: { kind: 'browser' },
      });
      const result = await campaign.result();
      const status = await campaign.status();

      // BC (v1), RL v2 refused by vb and rolled back, RL trained on from v1 and served everywhere.
      assert.equal(result.trainSteps, 4, JSON.stringify(status));
      assert.equal(status.rolledBack, 1, `one rollback: ${JSON.stringify(status)}`);
      assert.deepEqual(status.servedVersions, { va: result.policyVersion, vb: result.policyVersion });
      assert.ok(result.policyVersion > BAD_VERSION, `trained on after the rollback (v${result.policyVersion})`);
      for (const s of servers) {
        const load = (await (
          await fetch(`${s.url}/load`, { headers: { authorization: `Bearer ${TOKEN}` } })
        ).json()) as { version: number };
        assert.equal(load.version, result.policyVersion, `${s.serverId}'s front serves it`);
      }

      // The BC warm start trained: v1's weights differ from v0; the last RL step changed v1's.
      const v1 = await readHfManifest(store, CAMPAIGN, 1);
      assert.equal(v1.parentVersion, 0);
      const last = await readHfManifest(store, CAMPAIGN, result.policyVersion);
      // The served line goes back to v1 without the refused v2.
      const line: number[] = [];
      for (let m = last; ;) {
        const parent = m.parentVersion ?? 0;
        line.push(parent);
        if (parent <= 1) break;
        m = await readHfManifest(store, CAMPAIGN, parent);
      }
      assert.equal(
        line.at(-1),
        1,
        `trained on from v1 after the rollback: v${result.policyVersion} ← v${line.join(' ← v')}`
      );
      assert.ok(!line.includes(BAD_VERSION), `the refused v${BAD_VERSION} is not in the served line`);
      const v1Child = line.length === 1 ? last : await readHfManifest(store, CAMPAIGN, line.at(-2)!);
      await downloadHfCheckpoint(store, v1, path.join(tmp, 'v1'));
      await downloadHfCheckpoint(store, last, path.join(tmp, 'vlast'));
      const bc = await changedTensors(path.join(tmp, 'v1'), modelDir);
      assert.ok(bc.changed > 0, `BC changed ${bc.changed} of ${bc.tensors} tensors`);
      await downloadHfCheckpoint(store, v1Child, path.join(tmp, 'vrl'));
      const rl = await changedTensors(path.join(tmp, 'vrl'), path.join(tmp, 'v1'));
      assert.ok(rl.changed > 0, `the RL step from v1 changed ${rl.changed} of ${rl.tensors} tensors`);

      // RL steps trained all-failed groups with the pre-collected UI-TARS demonstration injected from the pool.
      const ledger = await Promise.all(
        (await store.list(keys.ledgerPrefix(CAMPAIGN))).map((k) => store.getJson(k, LedgerEntrySchema))
      );
      const rlSteps = ledger.filter((e) => e.trainStep >= 2);
      assert.ok(rlSteps.length >= 2, `RL ledger entries: ${ledger.map((e) => e.trainStep).join(', ')}`);
      for (const e of rlSteps) {
        const injected = e.consumed.filter((c) => c.injectedFromPool);
        assert.equal(injected.length, 1, `step ${e.trainStep} trained with one pooled success`);
        assert.equal(
          e.metrics.skippedSteps,
          0,
          `step ${e.trainStep}: every step re-scorable ${JSON.stringify(e.metrics)}`
        );
        assert.equal(e.metrics.skippedGroups, 0);
        const pooled = await store.getJson(injected[0]!.manifestKey, TrajectoryManifestSchema);
        assert.equal(pooled.source, 'demo', 'the pooled success is the pre-collected demonstration');
        assert.equal(pooled.reward, 1);
        const [step] = await store.getJsonLines(pooled.stepsKey, StepRecordSchema, pooled.stepsSha256);
        assert.match(step?.promptKey ?? '', /^prompts\//, 'it carries the prompt record the trainer re-scores');
        assert.ok(
          e.consumed.some((c) => !c.injectedFromPool && c.reward === 0),
          'next to the failed RL rollouts of its group'
        );
      }

      // RL trajectories: vLLM's logprobs, token ids and versions on every step; rewards from the env.
      const manifests = await Promise.all(
        (await store.list(`campaigns/${CAMPAIGN}/trajectories/`))
          .filter((k) => k.endsWith('manifest.json'))
          .map((k) => store.getJson(k, TrajectoryManifestSchema))
      );
      const rollouts = manifests.filter((m) => m.source === 'rollout');
      const demos = manifests.filter((m) => m.source === 'demo');
      assert.ok(demos.length >= 9 && demos.every((m) => m.reward === 1), 'the demonstrations solve the task');
      assert.ok(rollouts.length >= 8, `${rollouts.length} RL trajectories`);
      const byV1: Array<{ messages: unknown[]; ids: number[]; logprobs: number[] }> = [];
      for (const m of rollouts) {
        assert.equal(m.reward, 0, 'the random model does not solve click-target: the env says 0');
        const steps = await store.getJsonLines(m.stepsKey, StepRecordSchema, m.stepsSha256);
        for (const s of steps) {
          assert.ok(s.responseTokenIds && s.responseTokenIds.length > 0, 'token ids');
          assert.equal(s.tokenLogProbs?.length, s.responseTokenIds.length, 'one vLLM logprob per token');
          assert.ok(s.tokenLogProbs.every((x) => Number.isFinite(x) && x <= 0));
          assert.ok(s.policyVersion >= 0 && s.policyVersion <= result.policyVersion, `version ${s.policyVersion}`);
          assert.match(s.policyServer ?? '', /\/v1$/);
          // The prompt record is content-addressed and holds the screenshot as sent.
          assert.match(s.promptKey ?? '', /^prompts\/[0-9a-f]{64}\.json$/);
          const body = await store.getBytes(s.promptKey!);
          assert.equal(keys.vlmPrompt(sha256Hex(body)), s.promptKey, 'the key is the sha256 of the stored bytes');
          const prompt = PromptRecordSchema.parse(JSON.parse(body.toString('utf8')));
          const images = prompt.messages.flatMap((p) =>
            typeof p.content === 'string' ? [] : p.content.filter((c) => c.type === 'image_url')
          );
          assert.equal(images.length, s.step + 1, 'every screenshot so far, inline');
          if (s.policyVersion === 1)
            byV1.push({ messages: prompt.messages, ids: s.responseTokenIds, logprobs: s.tokenLogProbs });
        }
      }
      // transformers re-scoring v1's stored prompts and token ids gives the logprobs vLLM recorded.
      assert.ok(byV1.length > 0, 'rollouts sampled by v1');
      const scored = await scoreInTransformers(
        path.join(tmp, 'v1'),
        byV1.map((r) => ({ messages: r.messages, completion_token_ids: r.ids }))
      );
      byV1.forEach((r, i) => {
        const diff = Math.max(...scored[i]!.logprobs.map((x, j) => Math.abs(x - r.logprobs[j]!)));
        assert.ok(diff < 1e-3, `rollout ${i}: max |Δ logprob| ${diff} between transformers and vLLM`);
      });
    });
  }
);
