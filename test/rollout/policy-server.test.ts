/**
 * The policy server over HTTP with a real onnxruntime session and real MinIO: auth, batching, seeded
 * reproducibility, health, and refusal of corrupt or mismatched checkpoints while the old version keeps
 * serving. No Temporal here (test/rollout/reload.test.ts drives reloadPolicy through a real worker).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ensureInitialCheckpoint } from '../../activities/trainer/checkpoints';
import { freshBucket } from '../helpers/infra';
import { defaultPolicySpec, paramShapes, widenSpec } from '../../policy/spec';
import { encodeSafetensors, f32Tensor } from '../../storage/safetensors';
import { initWeights, weightsToSafetensors } from '../../policy/weights';
import {
  CheckpointRejectedError,
  policySpecHash,
  writeCheckpoint,
  writeInitialCheckpoint,
} from '../../rollout/checkpoint';
import { NetworkChangedError, PolicyEngine } from '../../rollout/engine';
import { startPolicyHttpServer, toHttpError, type RunningPolicyServer } from '../../rollout/policy-server';
import { CheckpointManifestSchema, type CheckpointManifest } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { sha256Hex, type ObjectStore } from '../../storage/object-store';
import { makePng, observation, TEST_TOKEN } from './helpers';

const CAMPAIGN = 'srv';
const spec = defaultPolicySpec;

interface Answer {
  actionIndex: number;
  action: { type: string };
  actionText: string;
  logProb: number;
  entropy: number;
  policyVersion: number;
  serverId: string;
}

describe('policy server (HTTP, real ORT session, MinIO checkpoints)', () => {
  let store: ObjectStore;
  let cleanup: () => Promise<void>;
  let engine: PolicyEngine;
  let srv: RunningPolicyServer;
  let v1: CheckpointManifest;

  const call = async (path: string, init: RequestInit = {}, token: string | null = TEST_TOKEN) => {
    const res = await fetch(`${srv.url}${path}`, {
      ...init,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const act = async (requests: unknown[]): Promise<Answer[]> => {
    const r = await call('/v1/act', { method: 'POST', body: JSON.stringify({ requests }) });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.answers as Answer[];
  };

  before(async () => {
    ({ store, cleanup } = await freshBucket('policy-srv'));
    await writeInitialCheckpoint(store, CAMPAIGN, spec, 1);
    v1 = await writeCheckpoint(store, CAMPAIGN, 1, spec, initWeights(spec, 2));
    engine = new PolicyEngine({ serverId: 'srv-a', spec, store, maxBatch: 8, maxWaitMs: 20 });
    await engine.reload(CAMPAIGN, 0);
    srv = await startPolicyHttpServer({ engine, token: TEST_TOKEN, store });
  });

  after(async () => {
    await srv?.close();
    await engine?.close();
    await cleanup?.();
  });

  it('binds loopback and requires the bearer token (401 without or with a wrong one)', async () => {
    assert.match(srv.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal((await call('/v1/health', {}, null)).status, 401);
    assert.equal((await call('/v1/health', {}, 'wrong-token-wrong-token')).status, 401);
    const noAuthAct = await call(
      '/v1/act',
      { method: 'POST', body: JSON.stringify({ requests: [{ observation: observation(1), seed: 1 }] }) },
      null
    );
    assert.equal(noAuthAct.status, 401);
    assert.equal(noAuthAct.body.code, 'unauthorized');
  });

  it('health reports server id, version, spec hash and queue state', async () => {
    const h = await call('/v1/health');
    assert.equal(h.status, 200);
    assert.equal(h.body.serverId, 'srv-a');
    assert.equal(h.body.version, 0);
    assert.equal(h.body.campaignId, CAMPAIGN);
    assert.equal(h.body.specHash, policySpecHash(spec));
    assert.equal(h.body.queueDepth, 0);
    assert.equal(h.body.inFlight, 0);
  });

  it('groups the observations of concurrent requests into batches of at most maxBatch', async () => {
    const before = engine.batchSizes();
    const answers = await act(
      Array.from({ length: 32 }, (_, i) => ({ observation: observation(i), seed: i, temperature: 1 }))
    );
    assert.equal(answers.length, 32);
    const after = engine.batchSizes();
    const added = [...after].map(([size, n]) => [size, n - (before.get(size) ?? 0)]).filter(([, n]) => n! > 0);
    // One HTTP call submits all 32 in the same tick: exactly four full batches.
    assert.deepEqual(added, [[8, 4]]);

    // Many concurrent HTTP calls: whatever the arrival pattern, no batch exceeds maxBatch and all are answered.
    const many = await Promise.all(
      Array.from({ length: 24 }, (_, i) => act([{ observation: observation(100 + i), seed: i }]))
    );
    assert.equal(many.length, 24);
    assert.ok(Math.max(...engine.batchSizes().keys()) <= 8);
  });

  it('answers carry a canonical action, UI-TARS text, log-prob, entropy, version and server id', async () => {
    const [a] = await act([{ observation: observation(5, 'type the word', ['hello']), seed: 42, temperature: 1 }]);
    assert.ok(a);
    assert.equal(a.policyVersion, 0);
    assert.equal(a.serverId, 'srv-a');
    assert.ok(a.actionIndex >= 0 && a.actionIndex < 272);
    assert.ok(a.logProb < 0 && Number.isFinite(a.logProb));
    assert.ok(a.entropy > 0 && a.entropy <= Math.log(272));
    assert.match(a.actionText, /^Thought: .*\nAction: \w+\(/s);
  });

  it('seeded sampling is reproducible: same observation + seed + version → same action, alone or in a batch', async () => {
    const req = { observation: observation(7, 'click on the blue box'), seed: 12345, temperature: 1 };
    const [alone] = await act([req]);
    const inBatch = await act([
      ...Array.from({ length: 7 }, (_, i) => ({ observation: observation(200 + i), seed: i })),
      req,
    ]);
    const again = inBatch[7]!;
    assert.ok(alone);
    assert.equal(again.actionIndex, alone.actionIndex);
    assert.deepEqual(again.action, alone.action);
    assert.ok(Math.abs(again.logProb - alone.logProb) < 1e-5, `${again.logProb} vs ${alone.logProb}`);
    // And the seed matters: 16 different seeds do not all give the same action from a near-uniform policy.
    const spread = await act(Array.from({ length: 16 }, (_, s) => ({ ...req, seed: s })));
    assert.ok(new Set(spread.map((x) => x.actionIndex)).size > 1);
  });

  it('greedy ignores the seed; temperature changes the behaviour log-prob of the same action', async () => {
    const obs = observation(9);
    const g = await act([1, 2, 3].map((seed) => ({ observation: obs, seed, greedy: true })));
    assert.equal(new Set(g.map((x) => x.actionIndex)).size, 1);
    const [t1] = await act([{ observation: obs, seed: 77, temperature: 1 }]);
    const [t2] = await act([{ observation: obs, seed: 77, temperature: 2 }]);
    assert.ok(t1 && t2);
    if (t1.actionIndex === t2.actionIndex) assert.notEqual(t1.logProb, t2.logProb);
  });

  it('masks: type_field tokens beyond the task fields and explicitly masked actions are never chosen', async () => {
    // Allow only two actions: cell 0 and "finished" (index 256 + 11).
    const mask = Array.from({ length: 272 }, (_, i) => i === 0 || i === 267);
    const answers = await act(
      Array.from({ length: 16 }, (_, s) => ({ observation: { ...observation(3), mask }, seed: s }))
    );
    assert.ok(answers.every((a) => a.actionIndex === 0 || a.actionIndex === 267));
    const bad = await call('/v1/act', {
      method: 'POST',
      body: JSON.stringify({ requests: [{ observation: { ...observation(3), mask: [true] }, seed: 1 }] }),
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.retryable, false);
  });

  it('accepts a screenshot by its content-addressed key', async () => {
    const png = makePng(11);
    const ref = await store.putScreenshot(png);
    const [byKey] = await act([{ observation: { screenshotKey: ref.key, instruction: 'x', fields: [] }, seed: 3 }]);
    const [inline] = await act([
      { observation: { pngBase64: png.toString('base64'), instruction: 'x', fields: [] }, seed: 3 },
    ]);
    assert.equal(byKey?.actionIndex, inline?.actionIndex);
  });

  it('rejects malformed requests with 400 (not retryable)', async () => {
    const notPng = await call('/v1/act', {
      method: 'POST',
      body: JSON.stringify({ requests: [{ observation: { pngBase64: 'aGVsbG8=', instruction: 'x' }, seed: 1 }] }),
    });
    assert.equal(notPng.status, 400);
    const noObs = await call('/v1/act', { method: 'POST', body: JSON.stringify({ requests: [{ seed: 1 }] }) });
    assert.equal(noObs.status, 400);
    const notJson = await call('/v1/act', { method: 'POST', body: '{' });
    assert.equal(notJson.status, 400);
  });

  it('refuses a truncated weights object and keeps serving the old version', async () => {
    const full = weightsToSafetensors(spec, initWeights(spec, 3));
    const ref = await store.putBytes(
      keys.checkpointWeights(CAMPAIGN, 2),
      full.subarray(0, Math.floor(full.length / 2))
    );
    // The manifest records the hash of the full object, as a trainer whose upload got cut would have.
    await store.putJson(
      keys.checkpointManifest(CAMPAIGN, 2),
      { ...v1, version: 2, parentVersion: 1, weights: { ...ref, sha256: sha256Hex(full), bytes: full.length } },
      CheckpointManifestSchema
    );
    await assert.rejects(engine.reload(CAMPAIGN, 2), (err: unknown) => {
      assert.ok(err instanceof CheckpointRejectedError);
      assert.equal(err.reason, 'corrupt');
      assert.match(err.message, /v2 refused \(corrupt\).*sha256/);
      return true;
    });
    const h = await call('/v1/health');
    assert.equal(h.body.version, 0);
    assert.match(String(h.body.lastReloadError), /corrupt/);
    const [a] = await act([{ observation: observation(1), seed: 1 }]);
    assert.equal(a?.policyVersion, 0);
  });

  it('refuses checkpoints of another shape or spec hash, and a missing one', async () => {
    // Weights of a wider net under a manifest that claims this spec: the header names the wider network.
    const wide = widenSpec(spec, 2);
    const wideRef = await store.putBytes(
      keys.checkpointWeights(CAMPAIGN, 3),
      weightsToSafetensors(wide, initWeights(wide, 1))
    );
    await store.putJson(
      keys.checkpointManifest(CAMPAIGN, 3),
      { ...v1, version: 3, weights: wideRef },
      CheckpointManifestSchema
    );
    await assert.rejects(
      engine.reload(CAMPAIGN, 3),
      (err: unknown) =>
        err instanceof CheckpointRejectedError &&
        err.reason === 'mismatch' &&
        err.message.includes(
          `header names network ${policySpecHash(wide)}, but the manifest says spec hash ${v1.specHash}`
        )
    );
    // Weights that do not name their network (written before the header field): the shapes give them away.
    const wideWeights = initWeights(wide, 1);
    const unnamedRef = await store.putBytes(
      keys.checkpointWeights(CAMPAIGN, 6),
      encodeSafetensors(
        Object.fromEntries(paramShapes(wide).map((p) => [p.name, f32Tensor(p.shape, wideWeights[p.name]!)]))
      )
    );
    await store.putJson(
      keys.checkpointManifest(CAMPAIGN, 6),
      { ...v1, version: 6, weights: unnamedRef },
      CheckpointManifestSchema
    );
    await assert.rejects(
      engine.reload(CAMPAIGN, 6),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'mismatch' && /shape/.test(err.message)
    );

    // Right tensors, but the manifest says another architecture.
    await store.putJson(
      keys.checkpointManifest(CAMPAIGN, 4),
      { ...v1, version: 4, specHash: 'deadbeefdeadbeef' },
      CheckpointManifestSchema
    );
    await assert.rejects(
      engine.reload(CAMPAIGN, 4),
      (err: unknown) =>
        err instanceof CheckpointRejectedError && err.reason === 'mismatch' && /spec hash deadbeef/.test(err.message)
    );

    // A manifest stored under the wrong version key.
    await store.putJson(keys.checkpointManifest(CAMPAIGN, 5), v1, CheckpointManifestSchema);
    await assert.rejects(
      engine.reload(CAMPAIGN, 5),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'mismatch'
    );

    await assert.rejects(
      engine.reload(CAMPAIGN, 99),
      (err: unknown) => err instanceof CheckpointRejectedError && err.reason === 'not_found'
    );
    assert.equal(engine.served?.version, 0);
    const [a] = await act([{ observation: observation(1), seed: 1 }]);
    assert.equal(a?.policyVersion, 0);
  });

  it('serves the network a checkpoint names; a request encoded for the old one gets network_changed; a pinned server refuses', async () => {
    // A campaign of another architecture (policy.width = 2): nobody told this server about it. Its v0 is
    // written by the trainer, as in a campaign (its weights header names the network).
    const WIDE = 'srv-wide';
    const wide = widenSpec(spec, 2);
    await ensureInitialCheckpoint(store, WIDE, wide, 5);
    const before = engine.network;
    const r = await engine.reload(WIDE, 0);
    assert.equal(r.unchanged, false);
    const h = await call('/v1/health');
    assert.equal(h.body.campaignId, WIDE);
    assert.equal(h.body.specHash, policySpecHash(wide), 'health names the network served');
    // Over HTTP the answer comes from the wide network: the same as its own session's greedy choice.
    const [a] = await act([{ observation: observation(4), seed: 4, greedy: true }]);
    assert.equal(a?.policyVersion, 0);
    const reference = new PolicyEngine({ serverId: 'ref', spec: wide, store, pinSpec: true });
    try {
      await reference.reload(WIDE, 0);
      const want = await reference.act(
        { png: makePng(4), instruction: 'click on the red box', fields: [] },
        { seed: 4, temperature: 1, greedy: true }
      );
      assert.equal(a?.actionIndex, want.actionIndex);
      assert.ok(Math.abs(a!.logProb - want.logProb) < 1e-5, `${a?.logProb} vs ${want.logProb}`);
    } finally {
      await reference.close();
    }
    // A request the HTTP layer checked against the old network, reaching the engine after the swap.
    await assert.rejects(
      engine.act(
        { png: makePng(4), instruction: 'click on the red box', fields: [] },
        { seed: 4, temperature: 1 },
        before
      ),
      (err: unknown) => err instanceof NetworkChangedError && err.message.includes(policySpecHash(wide))
    );
    assert.equal(
      toHttpError(new NetworkChangedError('x', 'a', 'b')).status,
      503,
      'retryable: the client sends it again'
    );

    // Pinned to the default network (--spec-file): the wide checkpoint is refused, naming the flag.
    const pinned = new PolicyEngine({ serverId: 'pinned', spec, store, pinSpec: true });
    try {
      await assert.rejects(
        pinned.reload(WIDE, 0),
        (err: unknown) =>
          err instanceof CheckpointRejectedError &&
          err.reason === 'mismatch' &&
          /pinned to by its --spec-file/.test(err.message)
      );
      assert.equal(pinned.served, undefined);
    } finally {
      await pinned.close();
    }
    // Back to the default network.
    await engine.reload(CAMPAIGN, 0);
    assert.equal(engine.network, before, 'the configured network is reused, not rebuilt');
    assert.equal((await call('/v1/health')).body.specHash, policySpecHash(spec));
  });

  it('reloads a good version, and reloading it again is a no-op', async () => {
    const r = await engine.reload(CAMPAIGN, 1);
    assert.equal(r.version, 1);
    assert.equal(r.previousVersion, 0);
    assert.equal(r.unchanged, false);
    const [a] = await act([{ observation: observation(1), seed: 1 }]);
    assert.equal(a?.policyVersion, 1);
    const again = await engine.reload(CAMPAIGN, 1);
    assert.equal(again.unchanged, true);
    assert.equal((await call('/v1/health')).body.version, 1);
  });

  it('writeInitialCheckpoint is idempotent and refuses a v0 of another spec', async () => {
    const a = await writeInitialCheckpoint(store, CAMPAIGN, spec, 1);
    const b = await writeInitialCheckpoint(store, CAMPAIGN, spec, 999);
    assert.equal(b.weights.sha256, a.weights.sha256, 'an existing v0 is never replaced');
    await assert.rejects(writeInitialCheckpoint(store, CAMPAIGN, widenSpec(spec, 2), 1), CheckpointRejectedError);
  });

  it('answers 503 (retryable) while no model is loaded', async () => {
    const empty = new PolicyEngine({ serverId: 'empty', spec, store });
    const s = await startPolicyHttpServer({ engine: empty, token: TEST_TOKEN });
    try {
      const res = await fetch(`${s.url}/v1/act`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_TOKEN}` },
        body: JSON.stringify({ requests: [{ observation: observation(1), seed: 1 }] }),
      });
      assert.equal(res.status, 503);
      const body = (await res.json()) as { code: string; retryable: boolean };
      assert.equal(body.code, 'not_ready');
      assert.equal(body.retryable, true);
    } finally {
      await s.close();
      await empty.close();
    }
  });
});
