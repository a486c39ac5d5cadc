/**
 * The policy server's fast path: observations encoded by the sender (binary act body, or base64 in
 * JSON) give the same answers as the PNG path for the same screenshot, malformed encoded input is a
 * 400 that names the field, and the env-side EpisodePolicy switches to the encoded form on its own
 * (and back to the PNG when the served input size changes). Real HTTP, real onnxruntime sessions.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { defaultPolicySpec, type PolicySpec } from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import {
  BINARY_ACT_CONTENT_TYPE,
  createEmbeddedPolicy,
  encodeScreenshotImage,
  float32ToBase64,
  packActCall,
  PolicyEngine,
  PolicyRequestError,
  PolicyServerClient,
  startPolicyHttpServer,
  type ActAnswerWire,
  type OutgoingActRequest,
  type RunningPolicyServer,
} from '../../rollout';
import { ObjectStore } from '../../storage/object-store';
import { testSettings } from '../helpers/infra';
import { forwardRequest, makePng, TEST_TOKEN } from './helpers';

const spec = defaultPolicySpec;
/** A policy with 32×32 inputs (and an 8×8 click grid), to play a fleet that changed its input size. */
const spec32: PolicySpec = { ...defaultPolicySpec, imageSize: 32, gridSize: 8 };
const SCREEN = { width: 160, height: 160 };
const INSTRUCTION = 'type hello into the box';

interface ErrorAnswer {
  error: string;
  code: string;
  retryable: boolean;
}

/** Forwards every request (body and content type unchanged) to whichever server `target` names now. */
async function switchableProxy(initial: string) {
  let target = initial;
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.method === 'POST') contentTypes.push(req.headers['content-type'] ?? '');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void forwardRequest(target, req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    switchTo: (url: string) => (target = url),
    /** Content type of every POST so far, in order. */
    contentTypes,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('encoded observations (the policy server fast path)', () => {
  const engines: PolicyEngine[] = [];
  const servers: RunningPolicyServer[] = [];
  let srv: RunningPolicyServer;
  let srv32: RunningPolicyServer;

  const serve = async (serverId: string, s: PolicySpec) => {
    const engine = new PolicyEngine({
      serverId,
      spec: s,
      store: ObjectStore.fromSettings(testSettings()),
      maxBatch: 8,
      maxWaitMs: 1,
    });
    await engine.loadWeights('enc', 0, initWeights(s, 7));
    const server = await startPolicyHttpServer({ engine, token: TEST_TOKEN });
    engines.push(engine);
    servers.push(server);
    return server;
  };

  /** POSTs a raw act body and returns status and parsed answer. */
  const post = async (body: Uint8Array | string, contentType: string, url = srv.url) => {
    const res = await fetch(`${url}/v1/act`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': contentType },
      body,
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const postJson = (requests: unknown[]) => post(JSON.stringify({ requests }), 'application/json');
  const expect400 = async (
    r: Promise<{ status: number; body: Record<string, unknown> }>,
    code: string,
    field: RegExp
  ) => {
    const { status, body } = await r;
    assert.equal(status, 400, JSON.stringify(body));
    const e = body as unknown as ErrorAnswer;
    assert.equal(e.code, code, e.error);
    assert.equal(e.retryable, false);
    assert.match(e.error, field);
    return e;
  };

  const pngObservation = (seed: number) => ({
    pngBase64: makePng(seed).toString('base64'),
    instruction: INSTRUCTION,
    fields: ['hello'],
  });
  const encodedObservation = (seed: number) => ({
    encoded: encodeScreenshotImage(makePng(seed), SCREEN, spec.imageSize),
    instruction: INSTRUCTION,
    fields: ['hello'],
  });

  before(async () => {
    srv = await serve('enc-64', spec);
    srv32 = await serve('enc-32', spec32);
  });

  after(async () => {
    for (const s of servers) await s.close();
    for (const e of engines) await e.close();
  });

  it('gives the PNG path answers: same action, log-prob and entropy within 1e-5, for every seed and greedy', async () => {
    const client = new PolicyServerClient({ endpoints: [srv.url], token: TEST_TOKEN });
    const requests = (obs: (shot: number) => OutgoingActRequest['observation']): OutgoingActRequest[] =>
      [0, 1, 2, 3].flatMap((shot) => [
        ...Array.from({ length: 12 }, (_, seed) => ({ observation: obs(shot), seed, temperature: 1.3 })),
        { observation: obs(shot), seed: 0, temperature: 1, greedy: true },
      ]);
    const viaPng = await client.actMany(requests(pngObservation));
    const viaBinary = await client.actMany(requests(encodedObservation));
    // The same tensor as base64 inside a JSON body (for senders without the binary form).
    const viaBase64 = await client.actMany(
      requests((shot) => {
        const e = encodeScreenshotImage(makePng(shot), SCREEN, spec.imageSize);
        return {
          encoded: { width: e.width, height: e.height, size: e.size, float32Base64: float32ToBase64(e.data) },
          instruction: INSTRUCTION,
          fields: ['hello'],
        };
      })
    );
    assert.equal(viaPng.length, 4 * 13);
    const same = (a: ActAnswerWire, b: ActAnswerWire, what: string) => {
      assert.equal(b.actionIndex, a.actionIndex, what);
      assert.deepEqual(b.action, a.action, what);
      assert.equal(b.actionText, a.actionText, what);
      assert.ok(Math.abs(b.logProb - a.logProb) <= 1e-5, `${what}: logProb ${b.logProb} vs ${a.logProb}`);
      assert.ok(Math.abs(b.entropy - a.entropy) <= 1e-5, `${what}: entropy ${b.entropy} vs ${a.entropy}`);
      assert.equal(b.policyVersion, a.policyVersion, what);
    };
    viaPng.forEach((a, i) => {
      same(a, viaBinary[i]!, `binary #${i}`);
      same(a, viaBase64[i]!, `base64 #${i}`);
    });
    // Different screenshots and seeds really give different answers (the comparison above can fail).
    assert.ok(new Set(viaPng.map((a) => a.actionIndex)).size > 4);
    assert.ok(new Set(viaPng.map((a) => a.entropy.toFixed(6))).size >= 4);
    assert.equal(client.inputSize, spec.imageSize, 'answers name the served input size');
  });

  it("carries the episode's previous action to the network (the `prev` input the trainer rebuilds)", async () => {
    const client = new PolicyServerClient({ endpoints: [srv.url], token: TEST_TOKEN });
    const greedy = (previous?: { actionIndex: number; changed: boolean }) =>
      client.act({
        observation: { ...encodedObservation(1), ...(previous ? { previous } : {}) },
        seed: 0,
        temperature: 1,
        greedy: true,
      });
    const first = await greedy();
    // The same action again on an unchanged screen is discouraged (the repeat bias): the answer changes.
    const repeated = await greedy({ actionIndex: first.actionIndex, changed: false });
    assert.ok(
      repeated.actionIndex !== first.actionIndex || Math.abs(repeated.logProb - first.logProb) > 1e-6,
      'the previous action changed what the network computed'
    );
    await expect400(
      postJson([{ observation: { ...pngObservation(1), previous: { actionIndex: -1, changed: true } }, seed: 0 }]),
      'bad_request',
      /previous/
    );
    // The env-side policy sends it from the second step on, as the trainer rebuilds it from steps.jsonl.
    const sent: unknown[] = [];
    const spy = new PolicyServerClient({ endpoints: [srv.url], token: TEST_TOKEN });
    const act = spy.act.bind(spy);
    spy.act = (req) => {
      sent.push(req.observation.previous);
      return act(req);
    };
    const policy = createEmbeddedPolicy(spy, { greedy: true });
    const png = makePng(2);
    const obs = { png, width: 160, height: 160, instruction: INSTRUCTION, fields: ['hello'], step: 0, history: [] };
    const a0 = await policy.act(obs, { seed: 0, temperature: 0 });
    await policy.act({ ...obs, step: 1 }, { seed: 0, temperature: 0 });
    await policy.act({ ...obs, png: makePng(3), step: 2 }, { seed: 0, temperature: 0 });
    assert.equal(sent[0], undefined, 'no previous action on the first step');
    assert.deepEqual(sent[1], { actionIndex: a0.actionIndex, changed: false });
    assert.equal((sent[2] as { changed: boolean }).changed, true);
  });

  it('refuses encoded input of the wrong size or length with a 400 that names the field', async () => {
    const good = encodeScreenshotImage(makePng(1), SCREEN, spec.imageSize);
    const small = encodeScreenshotImage(makePng(1), SCREEN, 32);
    const base = { instruction: 'x', fields: [] };
    // Wrong dims: a 32×32 encoding sent to a 64×64 policy.
    const dims = await expect400(
      postJson([
        { observation: pngObservation(1), seed: 1 },
        {
          observation: {
            ...base,
            encoded: { width: 160, height: 160, size: 32, float32Base64: float32ToBase64(small.data) },
          },
          seed: 1,
        },
      ]),
      'input_size_mismatch',
      /requests\.1\.observation\.encoded\.size is 32/
    );
    assert.match(dims.error, /64×64/);
    // Wrong length: the right size, but only half the values.
    await expect400(
      postJson([
        {
          observation: {
            ...base,
            encoded: { width: 160, height: 160, size: 64, float32Base64: float32ToBase64(good.data.subarray(0, 6144)) },
          },
          seed: 1,
        },
      ]),
      'bad_encoded_observation',
      /requests\.0\.observation\.encoded\.float32Base64 decodes to 24576 bytes.*49152/
    );
    // Binary body whose tensor section is short of the second observation's data.
    const packed = packActCall([
      { observation: { ...base, encoded: good }, seed: 1 },
      { observation: { ...base, encoded: good }, seed: 2 },
    ]);
    const short = (packed.body as Uint8Array).subarray(0, (packed.body as Uint8Array).byteLength - 100);
    await expect400(
      post(short, BINARY_ACT_CONTENT_TYPE),
      'bad_encoded_observation',
      /requests\.1\.observation\.encoded: the body's tensor section has 49052 bytes left, this observation needs 49152/
    );
    // … or has bytes no observation claims.
    const extra = Buffer.concat([packed.body as Uint8Array, new Uint8Array(8)]);
    await expect400(post(extra, BINARY_ACT_CONTENT_TYPE), 'bad_encoded_observation', /8 bytes more/);
    // A JSON body must carry the values itself.
    await expect400(
      postJson([{ observation: { ...base, encoded: { width: 160, height: 160, size: 64 } }, seed: 1 }]),
      'bad_encoded_observation',
      /requests\.0\.observation\.encoded\.float32Base64 is required in a JSON body/
    );
    // Values outside [0,1]: a wrong scale (0–255) is refused before batching…
    const scaled = good.data.map((v) => v * 255);
    await expect400(
      post(
        packActCall([{ observation: { ...base, encoded: { ...good, data: scaled } }, seed: 1 }]).body,
        BINARY_ACT_CONTENT_TYPE
      ),
      'bad_encoded_observation',
      /requests\.0: observation\.encoded value 0 is 240; encoded pixels must be in \[0,1\]/
    );
    // …and a single NaN or ∞ (a spot check may miss it) is caught from its own row's output, while the
    // other observations of the batch are answered normally.
    for (const poison of [NaN, Infinity]) {
      const bad = new Float32Array(good.data);
      bad[5] = poison;
      await expect400(
        post(
          packActCall([
            { observation: { ...base, encoded: good }, seed: 1 },
            { observation: { ...base, encoded: { ...good, data: bad } }, seed: 1 },
          ]).body,
          BINARY_ACT_CONTENT_TYPE
        ),
        'bad_encoded_observation',
        /requests\.1: the policy's output for observation\.encoded is not finite/
      );
    }
    const poisoned = new Float32Array(good.data);
    poisoned[5] = NaN;
    const rows = await Promise.allSettled([
      engines[0]!.act({ image: good.data, width: 160, height: 160, ...base }, { seed: 4, temperature: 1 }),
      engines[0]!.act({ image: poisoned, width: 160, height: 160, ...base }, { seed: 4, temperature: 1 }),
    ]);
    assert.equal(rows[0].status, 'fulfilled', 'the healthy row of the same batch is answered');
    assert.equal(rows[1].status, 'rejected');
    // Schema-level: a missing screen size, two screenshot forms at once, a body that is not the binary form.
    await expect400(
      postJson([{ observation: { ...base, encoded: { height: 160, size: 64, float32Base64: 'AAAA' } }, seed: 1 }]),
      'bad_request',
      /requests\.0\.observation\.encoded\.width/
    );
    await expect400(
      postJson([
        {
          observation: { ...pngObservation(1), encoded: { width: 1, height: 1, size: 64, float32Base64: 'AAAA' } },
          seed: 1,
        },
      ]),
      'bad_request',
      /exactly one of encoded, pngBase64 and screenshotKey/
    );
    await expect400(post('{"requests":[]}', BINARY_ACT_CONTENT_TYPE), 'bad_binary_body', /must start with "DFA1"/);
    // None of this hurt the server.
    const [ok] = await new PolicyServerClient({ endpoints: [srv.url], token: TEST_TOKEN }).actMany([
      { observation: { ...base, encoded: good }, seed: 3 },
    ]);
    assert.equal(ok?.serverId, 'enc-64');
  });

  it('the EpisodePolicy sends the PNG first, then encoded observations, and falls back when the input size changes', async () => {
    const proxy = await switchableProxy(srv.url);
    try {
      const client = new PolicyServerClient({ endpoints: [proxy.url], token: TEST_TOKEN });
      // A fresh policy per call: each is an episode's first step (no previous action), so answers compare.
      const firstStep = () => createEmbeddedPolicy(client);
      const png = makePng(9);
      const obs = { png, ...SCREEN, instruction: INSTRUCTION, fields: ['hello'], step: 0 };
      assert.equal(client.inputSize, undefined);
      const first = await firstStep().act(obs, { seed: 5, temperature: 1 });
      assert.equal(client.inputSize, 64, 'learned from the first (PNG) answer');
      const second = await firstStep().act(obs, { seed: 5, temperature: 1 });
      assert.equal(second.actionIndex, first.actionIndex);
      assert.ok(Math.abs(second.logProb - first.logProb) <= 1e-5);
      const servedBefore = engines[0]!.health().items;
      await firstStep().act(obs, { seed: 6, temperature: 1 });
      assert.equal(engines[0]!.health().items, servedBefore + 1);
      assert.deepEqual(proxy.contentTypes, ['application/json', BINARY_ACT_CONTENT_TYPE, BINARY_ACT_CONTENT_TYPE]);

      // The fleet now serves 32×32 inputs: the encoded request is refused, the PNG retry is answered.
      proxy.switchTo(srv32.url);
      const direct = client.act({ observation: encodedObservation(9), seed: 1 });
      await assert.rejects(
        direct,
        (err: unknown) => err instanceof PolicyRequestError && err.code === 'input_size_mismatch'
      );
      const refitted = await firstStep().act(obs, { seed: 5, temperature: 1 });
      assert.equal(refitted.policyServer, 'enc-32');
      assert.equal(client.inputSize, 32);
      assert.ok((refitted.actionIndex ?? Infinity) < 64 + 16, 'an action of the 32×32 policy');
      // …and from then on the env side encodes at 32×32, matching the server's own PNG decoding.
      const [viaPng] = await client.actMany([
        { observation: { pngBase64: png.toString('base64'), instruction: INSTRUCTION, fields: ['hello'] }, seed: 8 },
      ]);
      const viaEncoded = await firstStep().act(obs, { seed: 8, temperature: 1 });
      assert.equal(viaEncoded.actionIndex, viaPng?.actionIndex);
      assert.ok(Math.abs(viaEncoded.logProb - viaPng!.logProb) <= 1e-5);
      assert.equal(proxy.contentTypes.at(-1), BINARY_ACT_CONTENT_TYPE);
    } finally {
      await proxy.close();
    }
  });
});
