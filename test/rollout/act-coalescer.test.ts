/**
 * ActCoalescer against a real policy server (real ORT session): steps that wait at the same time share
 * one HTTP call and each caller gets the answer to its own request; a refused call is resent request by
 * request so only the bad one fails; a fleet that does not answer fails the queued requests at once; an
 * aborted request never leaves. A gate proxy holds the calls in flight, so "waiting" is a state, not a
 * timing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defaultPolicySpec } from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import {
  ActCoalescer,
  PolicyEngine,
  PolicyRequestError,
  PolicyServerClient,
  PolicyUnavailableError,
  startPolicyHttpServer,
  type PolicyAnswer,
  type RunningPolicyServer,
} from '../../rollout';
import { ObjectStore } from '../../storage/object-store';
import { freePort, testSettings } from '../helpers/infra';
import { gateProxy, observation, TEST_TOKEN } from './helpers';

const spec = defaultPolicySpec;

const waitFor = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 2));
};

const request = (seed: number) => ({ observation: observation(seed % 7), seed, temperature: 1 });
/** What a caller compares: the action the server chose for this request and its log-prob. */
const gist = (a: PolicyAnswer) => ({ actionIndex: a.actionIndex, logProb: a.logProb, version: a.policyVersion });

describe('ActCoalescer: env-worker steps share HTTP calls', () => {
  let engine: PolicyEngine;
  let server: RunningPolicyServer;

  before(async () => {
    engine = new PolicyEngine({
      serverId: 'coalesce',
      spec,
      store: ObjectStore.fromSettings(testSettings()),
      maxBatch: 32,
      maxWaitMs: 1,
    });
    await engine.loadWeights('coalesce', 0, initWeights(spec, 3));
    server = await startPolicyHttpServer({ engine, token: TEST_TOKEN });
  });

  after(async () => {
    await server.close();
    await engine.close();
  });

  /**
   * A coalescer allowed one call at a time, behind a gate proxy, with that one call already out and held:
   * whatever is asked next waits in its queue until `gate.open()`.
   */
  const withHeldCall = async () => {
    const gate = await gateProxy(server.url);
    const coalescer = new ActCoalescer(new PolicyServerClient({ endpoints: [gate.url], token: TEST_TOKEN }), {
      maxCallsInFlight: 1,
    });
    const first = coalescer.act(request(0));
    await waitFor(() => gate.callSizes.length === 1);
    return { gate, coalescer, first };
  };

  it('requests that wait together leave in one call, and each caller gets the answer to its own request', async () => {
    const { gate, coalescer, first } = await withHeldCall();
    try {
      // The one call allowed is out (held by the gate): these 20 wait and must leave together.
      const rest = Array.from({ length: 20 }, (_, i) => coalescer.act(request(i + 1)));
      gate.open();
      const answers = await Promise.all([first, ...rest]);
      assert.deepEqual(gate.callSizes, [1, 20]);
      assert.deepEqual(coalescer.stats(), { calls: 2, requests: 21 });
      // The same requests one per call, straight to the server: the same answers, in the same places.
      const direct = new PolicyServerClient({ endpoints: [server.url], token: TEST_TOKEN });
      const alone = await Promise.all(answers.map((_, i) => direct.act(request(i))));
      assert.deepEqual(answers.map(gist), alone.map(gist));
      assert.ok(new Set(answers.map((a) => a.actionIndex)).size > 1, 'distinct requests, distinct answers');
    } finally {
      await gate.close();
    }
  });

  it('a call refused for one malformed request is resent request by request: only that one fails', async () => {
    const { gate, coalescer, first } = await withHeldCall();
    try {
      const bad = { observation: { pngBase64: 'aGVsbG8=', instruction: 'x', fields: [] }, seed: 9, temperature: 1 };
      const outcomes = Promise.allSettled(
        [1, 2, 3, 4].map((s) => coalescer.act(request(s))).concat(coalescer.act(bad))
      );
      gate.open();
      await first;
      const settled = await outcomes;
      assert.deepEqual(
        settled.map((s) => s.status),
        ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected']
      );
      const refused = settled[4] as PromiseRejectedResult;
      assert.ok(refused.reason instanceof PolicyRequestError, String(refused.reason));
      // The first call, the refused call of 5, then each of the 5 alone.
      assert.deepEqual(gate.callSizes, [1, 5, 1, 1, 1, 1, 1]);
      assert.deepEqual(coalescer.stats(), { calls: 7, requests: 6 });
    } finally {
      await gate.close();
    }
  });

  it('when no server answers, the requests queued behind the failed call fail with it (no second round of retries)', async () => {
    const deadUrl = `http://127.0.0.1:${await freePort()}`;
    const coalescer = new ActCoalescer(
      new PolicyServerClient({
        endpoints: [deadUrl],
        token: TEST_TOKEN,
        maxAttempts: 2,
        backoff: { baseMs: 1, capMs: 5 },
      }),
      { maxCallsInFlight: 1 }
    );
    const settled = await Promise.allSettled([0, 1, 2, 3, 4].map((s) => coalescer.act(request(s))));
    for (const s of settled) {
      assert.equal(s.status, 'rejected');
      assert.ok((s as PromiseRejectedResult).reason instanceof PolicyUnavailableError);
    }
    assert.deepEqual(coalescer.stats(), { calls: 1, requests: 5 });
  });

  it('a request aborted while it waits never leaves; the others are answered', async () => {
    const { gate, coalescer, first } = await withHeldCall();
    try {
      const abort = new AbortController();
      const dropped = coalescer.act(request(1), abort.signal);
      const kept = coalescer.act(request(2));
      abort.abort(new Error('episode cancelled'));
      await assert.rejects(dropped, /episode cancelled/);
      gate.open();
      await Promise.all([first, kept]);
      assert.deepEqual(gate.callSizes, [1, 1]);
      assert.deepEqual(coalescer.stats(), { calls: 2, requests: 3 });
    } finally {
      await gate.close();
    }
  });

  it('refuses settings it cannot honour, naming the option', () => {
    const client = new PolicyServerClient({ endpoints: [server.url], token: TEST_TOKEN });
    assert.throws(() => new ActCoalescer(client, { maxCallsInFlight: 0 }), /maxCallsInFlight must be an integer ≥ 1/);
    assert.throws(() => new ActCoalescer(client, { maxPerCall: 1000 }), /maxPerCall must be an integer in 1…256/);
  });
});
