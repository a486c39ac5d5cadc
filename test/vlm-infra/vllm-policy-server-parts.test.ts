/**
 * The parts of the VLM policy server that need no vLLM (MinIO only): HF checkpoint folders in MinIO
 * (upload, verified download, typed refusals), the pre-reload compatibility check on safetensors
 * headers, the serving gate that makes version stamps exact, the chat request/answer contract, and the
 * env side's least-loaded routing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CheckpointRejectedError } from '../../rollout/checkpoint';
import {
  InvalidChatRequestError,
  MalformedAnswerError,
  prepareChatRequest,
  stampAnswer,
  validateChatAnswer,
} from '../../rollout/vllm/chat-answer';
import {
  checkFullWeightsCompatible,
  IncompatibleCheckpointError,
  readSafetensorsHeader,
} from '../../rollout/vllm/compat';
import { downloadHfCheckpoint, readHfManifest, uploadHfCheckpoint } from '../../rollout/vllm/hf-checkpoint';
import { startVllmFront } from '../../rollout/vllm/front';
import { LeastLoadedRouter } from '../../rollout/vllm/router';
import type { VllmControl } from '../../rollout/vllm/vllm-control';
import { chatCompletion } from '../../vlm/chat-client';
import { GateTimeoutError, ServingGate, type Served } from '../../rollout/vllm/serving-gate';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { versionFromModelName } from '../../vlm/uitars-policy';
import { freePort, freshBucket } from '../helpers/infra';
import { waitFor } from '../helpers/wait';

/** A safetensors file with F32 tensors of the given shapes (zeros). */
function writeSafetensors(file: string, tensors: Record<string, number[]>, dtype = 'F32'): void {
  const header: Record<string, unknown> = {};
  let offset = 0;
  for (const [name, shape] of Object.entries(tensors)) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  fs.writeFileSync(file, Buffer.concat([len, json, Buffer.alloc(offset)]));
}

function modelFolder(
  dir: string,
  tensors: Record<string, number[]>,
  config: object = { model_type: 'tiny', hidden: 4 }
): string {
  fs.mkdirSync(dir, { recursive: true });
  writeSafetensors(path.join(dir, 'model.safetensors'), tensors);
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  return dir;
}

const SHAPES = { 'a.weight': [4, 2], 'b.bias': [3] };

describe('HF checkpoint folders in MinIO', () => {
  let store: ObjectStore;
  let cleanup: () => Promise<void>;
  let tmp: string;

  before(async () => {
    ({ store, cleanup } = await freshBucket('vllm-ckpt'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-hf-'));
  });
  after(async () => {
    await cleanup?.();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('round-trips a folder byte for byte, manifest last', async () => {
    const src = modelFolder(path.join(tmp, 'src'), SHAPES);
    const m = await uploadHfCheckpoint(store, {
      campaignId: 'c',
      version: 3,
      parentVersion: 2,
      kind: 'full',
      dir: src,
    });
    assert.deepEqual(
      m.files.map((f) => f.name),
      ['config.json', 'model.safetensors']
    );
    const read = await readHfManifest(store, 'c', 3);
    assert.deepEqual(read, m);
    const got = await downloadHfCheckpoint(store, read, path.join(tmp, 'dl', 'v3'));
    for (const f of ['config.json', 'model.safetensors'])
      assert.deepEqual(fs.readFileSync(path.join(got.dir, f)), fs.readFileSync(path.join(src, f)));
    assert.deepEqual(fs.readdirSync(path.join(tmp, 'dl')), ['v3'], 'no partial folder left behind');
  });

  it('refuses altered bytes (corrupt), a missing manifest or file (not_found), and leaves no partial folder', async () => {
    const src = modelFolder(path.join(tmp, 'src2'), SHAPES);
    await uploadHfCheckpoint(store, { campaignId: 'c', version: 4, parentVersion: 3, kind: 'full', dir: src });
    await store.putBytes(keys.hfCheckpointFile('c', 4, 'model.safetensors'), Buffer.from('garbage'));
    const m = await readHfManifest(store, 'c', 4);
    const dest = path.join(tmp, 'dl2', 'v4');
    await assert.rejects(
      downloadHfCheckpoint(store, m, dest),
      (err: unknown) =>
        err instanceof CheckpointRejectedError && err.reason === 'corrupt' && /model\.safetensors/.test(err.message)
    );
    assert.deepEqual(fs.readdirSync(path.join(tmp, 'dl2')), []);
    await assert.rejects(
      readHfManifest(store, 'c', 99),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'not_found'
    );
    await store.remove(keys.hfCheckpointFile('c', 4, 'config.json'));
    await assert.rejects(
      downloadHfCheckpoint(store, m, dest),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'not_found'
    );
    await store.putBytes(keys.hfCheckpointManifest('c', 5), Buffer.from('{"schemaVersion": 1}'));
    await assert.rejects(
      readHfManifest(store, 'c', 5),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'corrupt'
    );
  });
});

describe('compatibility check before a full-weight reload', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-compat-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const served = modelFolder(path.join(tmp, 'served'), SHAPES);
  const refused = (dir: string, pattern: RegExp) =>
    assert.throws(
      () => checkFullWeightsCompatible(served, dir),
      (err: unknown) => err instanceof IncompatibleCheckpointError && pattern.test(err.message)
    );

  it('accepts the same names and shapes, refuses other shapes, names, dtypes, configs and truncated files', () => {
    checkFullWeightsCompatible(served, modelFolder(path.join(tmp, 'same'), SHAPES));
    refused(modelFolder(path.join(tmp, 'shape'), { ...SHAPES, 'b.bias': [4] }), /b\.bias: shape \[4\]/);
    refused(modelFolder(path.join(tmp, 'names'), { 'a.weight': [4, 2] }), /1 missing \(b\.bias\)/);
    refused(modelFolder(path.join(tmp, 'config'), SHAPES, { model_type: 'tiny', hidden: 8 }), /architecture/);
    checkFullWeightsCompatible(
      served,
      modelFolder(path.join(tmp, 'volatile'), SHAPES, { model_type: 'tiny', hidden: 4, transformers_version: '9' })
    );
    const ints = modelFolder(path.join(tmp, 'ints'), SHAPES);
    writeSafetensors(path.join(ints, 'model.safetensors'), SHAPES, 'I32');
    refused(ints, /dtype I32/);
    const cut = modelFolder(path.join(tmp, 'cut'), SHAPES);
    const file = path.join(cut, 'model.safetensors');
    fs.truncateSync(file, fs.statSync(file).size - 4);
    assert.throws(() => readSafetensorsHeader(file), /header describes/);
    refused(cut, /header describes/);
  });
});

describe('serving gate', () => {
  const served: Served = { campaignId: 'c', version: 0, kind: 'full', model: 'dartflow', dir: '/x' };

  it('holds new requests during a reload, waits for forwarded ones, and stamps each with its version', async () => {
    const gate = new ServingGate({ ...served });
    const first = await gate.enter(1000);
    assert.equal(first.version, 0);
    let drained = false;
    const holding = gate.hold(5000).then((release) => {
      drained = true;
      return release;
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(drained, false, 'the reload waits for the forwarded request');
    const waiting = gate.enter(5000);
    gate.leave();
    const release = await holding;
    gate.served = { ...served, version: 1 };
    release();
    assert.equal((await waiting).version, 1, 'a request held during the reload is served by the new version');
    gate.leave();
    assert.equal(gate.inFlight, 0);
  });

  it('gives up on a drain after its limit (reopening) and on a hold after the request limit', async () => {
    const gate = new ServingGate({ ...served });
    await gate.enter(1000);
    await assert.rejects(gate.hold(30), /still in flight/);
    assert.equal(gate.holding, false);
    gate.leave();
    const release = await gate.hold(30);
    await assert.rejects(gate.enter(30), GateTimeoutError);
    release();
    await gate.enter(30);
    gate.leave();
  });
});

describe('chat request and answer contract', () => {
  const served: Served = { campaignId: 'c', version: 7, kind: 'full', model: 'dartflow', dir: '/x' };
  const good = {
    model: 'dartflow',
    choices: [
      {
        message: { content: 'click(1,2)' },
        logprobs: { content: [{ token: 'token_id:12', logprob: -0.5 }] },
        finish_reason: 'stop',
      },
    ],
  };

  it('forces logprobs as token ids and the served model; refuses streams and empty messages', () => {
    const body = prepareChatRequest(
      { model: 'x', messages: [{ role: 'user', content: 'hi' }], logprobs: false },
      served
    );
    assert.equal(body.model, 'dartflow');
    assert.equal(body.logprobs, true);
    assert.equal(body.return_tokens_as_token_ids, true);
    assert.throws(() => prepareChatRequest({ messages: [] }, served), InvalidChatRequestError);
    assert.throws(() => prepareChatRequest({ messages: [{}], stream: true }, served), InvalidChatRequestError);
    assert.throws(() => prepareChatRequest([1], served), InvalidChatRequestError);
  });

  it('refuses answers without logprobs, with text tokens or non-finite logprobs; stamps good ones', () => {
    validateChatAnswer(good);
    const bad = (patch: object) => ({ ...good, choices: [{ ...good.choices[0], ...patch }] });
    assert.throws(() => validateChatAnswer(bad({ logprobs: null })), MalformedAnswerError);
    assert.throws(() => validateChatAnswer(bad({ logprobs: { content: [] } })), MalformedAnswerError);
    assert.throws(() => validateChatAnswer(bad({ logprobs: { content: [{ token: 'cl', logprob: -1 }] } })), /token_id/);
    assert.throws(() => validateChatAnswer({ choices: [] }), MalformedAnswerError);
    assert.throws(() => validateChatAnswer('oops'), MalformedAnswerError);
    const stamped = stampAnswer(good, served, 'p9');
    assert.equal(stamped.dartflow_version, 7);
    assert.equal(stamped.dartflow_server, 'p9');
    assert.equal(versionFromModelName(String(stamped.model), -1), 7);
  });
});

describe('least-loaded routing over VLM fronts (env side)', () => {
  const servers: http.Server[] = [];
  after(() => servers.forEach((s) => s.close()));

  /** A stand-in front whose /load reports `load()` (status and body). */
  async function fakeFront(
    load: () => { status: number; body: object },
    delayMs: () => number = () => 0
  ): Promise<string> {
    const srv = http.createServer((req, res) => {
      void new Promise((r) => setTimeout(r, delayMs())).then(() => {
        const { status, body } = load();
        res.writeHead(req.url?.split('?')[0] === '/v1/load' ? status : 404, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      });
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(srv.address() as AddressInfo).port}/v1`;
  }

  it('picks the fewest in flight, counts its own requests, and takes out refusing or dead endpoints', async () => {
    let busyLoad = 5;
    const busy = await fakeFront(() => ({ status: 200, body: { inFlight: busyLoad, healthy: true } }));
    const idle = await fakeFront(() => ({ status: 200, body: { inFlight: 1, healthy: true } }));
    let brokenStatus = 200;
    const flaky = await fakeFront(() => ({
      status: brokenStatus,
      body: { inFlight: 0, healthy: brokenStatus === 200 },
    }));
    const dead = `http://127.0.0.1:${await freePort()}/v1`;
    let clock = 0;
    const router = new LeastLoadedRouter({
      baseUrls: [busy, idle, flaky, dead],
      loadTtlMs: 1000,
      penaltyMs: 10_000,
      now: () => clock,
    });
    assert.equal(await router.pick(), flaky, 'fewest in flight');
    assert.ok(router.isOut(dead), 'an unreachable endpoint is out');
    brokenStatus = 503;
    clock += 1500;
    // A stale report does not hold up a pick: it is refreshed in the background.
    assert.equal(await router.pick(), flaky, 'the last report until the next one arrives');
    await router.refreshNow();
    assert.equal(await router.pick(), idle, 'an endpoint reporting unhealthy is out');
    assert.ok(router.isOut(flaky));
    // Requests this process sent since the last report count until the next one.
    router.begin(idle);
    router.begin(idle);
    router.begin(idle);
    router.begin(idle);
    router.begin(idle);
    assert.equal(await router.pick(), busy, 'idle (1 + 5 sent) now carries more than busy (5)');
    assert.equal(await router.pick(new Set([busy])), idle, 'an endpoint tried by this request is avoided');
    router.markFailed(busy);
    assert.equal(await router.pick(), idle);
    brokenStatus = 200;
    busyLoad = 0;
    clock += 20_000;
    const back = await router.pick();
    assert.ok(back === busy || back === flaky, 'taken-out endpoints come back after the penalty (both report 0)');
    assert.equal(router.isOut(busy) || router.isOut(flaky), false);
  });

  it('routes servers without a front (4xx on /load) by its own in-flight count', async () => {
    const a = await fakeFront(() => ({ status: 404, body: {} }));
    const b = (await fakeFront(() => ({ status: 404, body: {} }))).replace(/\/v1$/, '/other');
    const router = new LeastLoadedRouter({ baseUrls: [a, b] });
    router.begin(a);
    assert.equal(await router.pick(), b);
    assert.equal(router.isOut(a) || router.isOut(b), false);
    router.end(a);
    router.begin(b);
    assert.equal(await router.pick(), a);
  });
  it('keeps an endpoint whose /load is slow until several in a row time out; a refused one is out at once', async () => {
    let delayMs = 0;
    const slow = await fakeFront(
      () => ({ status: 200, body: { inFlight: 0, healthy: true } }),
      () => delayMs
    );
    const other = await fakeFront(() => ({ status: 200, body: { inFlight: 3, healthy: true } }));
    const refusing = `http://127.0.0.1:${await freePort()}/v1`; // nothing listens: connection refused
    let clock = 0;
    const router = new LeastLoadedRouter({
      baseUrls: [slow, other, refusing],
      loadTtlMs: 1000,
      loadTimeoutMs: 500,
      penaltyMs: 10_000,
      maxSlowLoads: 3,
      now: () => clock,
    });
    assert.equal(await router.pick(), slow);
    assert.ok(router.isOut(refusing), 'a refused /load takes the endpoint out at once');
    delayMs = 2000; // well past the 500 ms /load timeout
    for (let i = 1; i <= 2; i++) {
      clock += 1500;
      await router.refreshNow();
      assert.equal(router.isOut(slow), false, `${i} slow /load answer(s) in a row: still in rotation`);
      assert.equal(await router.pick(), slow, 'its last report stands');
    }
    clock += 1500;
    await router.refreshNow();
    assert.ok(router.isOut(slow), 'the third slow answer in a row takes it out');
    assert.equal(await router.pick(), other);
    // After the penalty it starts afresh: one slow answer does not take it out again.
    clock += 10_001;
    await router.refreshNow();
    assert.equal(router.isOut(slow), false, 'one slow answer after the penalty: still in rotation');
  });

  it("uses the front's count of other clients' requests, so its own finished requests never count", async () => {
    // The front counted 4 in flight when it answered, 3 of them this client's (finished since): others = 1.
    const a = await fakeFront(() => ({ status: 200, body: { inFlight: 4, inFlightOthers: 1, healthy: true } }));
    const b = await fakeFront(() => ({ status: 200, body: { inFlight: 2, inFlightOthers: 2, healthy: true } }));
    const seen: string[] = [];
    const router = new LeastLoadedRouter({
      baseUrls: [a, b],
      fetchImpl: (input, init) => {
        seen.push(String(input));
        return fetch(input, init);
      },
    });
    assert.equal(await router.pick(), a, '1 other request at a against 2 at b');
    assert.ok(
      seen.every((u) => u.endsWith(`/load?client=${router.clientId}`)),
      seen.join(', ')
    );
  });
});

describe('VLM front (rollout/vllm/front.ts) with a loopback stand-in for vLLM', () => {
  const answer = {
    model: 'dartflow',
    choices: [{ message: { content: 'click(1,2)' }, logprobs: { content: [{ token: 'token_id:12', logprob: -0.5 }] } }],
  };

  it("reports other clients' requests exactly and counts a late /health as busy, not down", async () => {
    // The stand-in holds every chat request until released.
    const held: Array<() => void> = [];
    const upstream = http.createServer((req, res) => {
      req.resume();
      held.push(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    // Each /health probe waits for the test to answer it.
    type Health = 'up' | 'down' | 'slow';
    let answerProbe: ((h: Health) => void) | undefined;
    const control = {
      baseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      healthy: () => Promise.resolve(true),
      health: () => new Promise<Health>((r) => (answerProbe = r)),
      reloadWeights: () => Promise.resolve(),
      loadLora: () => Promise.resolve(),
    } as unknown as VllmControl;
    const gate = new ServingGate({ campaignId: 'c', version: 3, kind: 'full', model: 'dartflow', dir: '/x' });
    const front = await startVllmFront({ serverId: 'f1', token: 'tok', gate, control, healthProbeEveryMs: 0 });
    try {
      const router = new LeastLoadedRouter({ baseUrls: [`${front.url}/v1`], apiKey: 'tok' });
      const ask = () =>
        chatCompletion(
          { baseUrls: [`${front.url}/v1`], model: 'dartflow', apiKey: 'tok', maxRetries: 0, router },
          { messages: [{ role: 'user', content: 'hi' }] as never, temperature: 0 }
        );
      const mine = [ask(), ask()];
      const theirs = fetch(`${front.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer tok', 'x-dartflow-client': 'someone-else' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
      await waitFor('three requests held by the stand-in', async () => held.length >= 3, 10_000, 5);
      const report = await front.load(router.clientId);
      assert.equal(report.inFlight, 3);
      assert.equal(report.inFlightOthers, 1, "this client's two requests are left out");
      assert.equal((await front.load()).inFlightOthers, 3, 'an anonymous asker sees them all');
      held.splice(0).forEach((release) => release());
      assert.equal((await Promise.all(mine))[0]!.version, 3);
      assert.equal((await theirs).status, 200);
      assert.equal((await front.load(router.clientId)).inFlight, 0);
      const stats = front.stats();
      assert.equal(stats.answered, 3);
      assert.ok(stats.upstreamMs > 0 && stats.upstreamMs <= stats.frontMs, JSON.stringify(stats));

      // A load() starts a probe when none is running (interval 0); the test answers it, then reads the
      // state with the next load() (which starts the probe the next step answers).
      const probe = async (h: Health) => {
        await waitFor(
          'a /health probe',
          async () => {
            await front.load();
            return answerProbe !== undefined;
          },
          10_000,
          5
        );
        const answer = answerProbe;
        answerProbe = undefined;
        answer!(h);
        await new Promise((r) => setTimeout(r, 5));
        return (await front.load()).healthy;
      };
      assert.equal(await probe('slow'), true, 'one late /health: busy');
      assert.equal(await probe('slow'), true, 'two late in a row: busy');
      assert.equal(await probe('slow'), false, 'three late in a row: down');
      assert.equal(await probe('up'), true, 'answers again: up');
      assert.equal(await probe('slow'), true, 'late once after that: busy');
      assert.equal(await probe('slow'), true, 'late twice in a row: busy');
      // vLLM answers a chat request in between: the late probes before it no longer count.
      const answeredChat = fetch(`${front.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer tok' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
      await waitFor('the chat request held by the stand-in', async () => held.length >= 1, 10_000, 5);
      held.splice(0).forEach((release) => release());
      assert.equal((await answeredChat).status, 200);
      assert.equal(await probe('slow'), true, 'late once after an answered request: busy, not the third in a row');
      assert.equal(await probe('down'), false, 'a refusal: down at once');
    } finally {
      await front.close();
      upstream.close();
    }
  });
});
