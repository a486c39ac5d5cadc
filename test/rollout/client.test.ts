/**
 * The env-side client against real policy servers (real ORT sessions): least-loaded routing, failover
 * when a server is down or times out, typed errors, and the EpisodePolicy adapter the env worker uses.
 * A gate proxy in front of one server holds its requests, so "loaded" is a state, not a timing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { PolicyContext } from '../../activities/env/policy';
import { defaultPolicySpec } from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import {
  embeddedPolicyFactory,
  PolicyEngine,
  PolicyRequestError,
  PolicyServerClient,
  PolicyUnavailableError,
  startPolicyHttpServer,
  type RunningPolicyServer,
} from '../../rollout';
import { ObjectStore } from '../../storage/object-store';
import { freePort, testSettings } from '../helpers/infra';
import { gateProxy, makePng, observation, TEST_TOKEN } from './helpers';

const spec = defaultPolicySpec;
const fastBackoff = { baseMs: 1, capMs: 5 };

const waitFor = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 2));
};

describe('policy client: routing, failover, EpisodePolicy adapter', () => {
  const engines: PolicyEngine[] = [];
  const servers: RunningPolicyServer[] = [];
  let A: RunningPolicyServer;
  let B: RunningPolicyServer;
  let C: RunningPolicyServer; // another token

  const serve = async (serverId: string, token = TEST_TOKEN) => {
    const engine = new PolicyEngine({
      serverId,
      spec,
      store: ObjectStore.fromSettings(testSettings()),
      maxBatch: 8,
      maxWaitMs: 1,
    });
    await engine.loadWeights('cli', 0, initWeights(spec, 1));
    const s = await startPolicyHttpServer({ engine, token });
    engines.push(engine);
    servers.push(s);
    return s;
  };

  before(async () => {
    A = await serve('A');
    B = await serve('B');
    C = await serve('C', 'some-other-token-0123456789');
  });

  after(async () => {
    for (const s of servers) await s.close();
    for (const e of engines) await e.close();
  });

  it('routes to the least-loaded server', async () => {
    const gate = await gateProxy(A.url);
    try {
      const client = new PolicyServerClient({ endpoints: [gate.url, B.url], token: TEST_TOKEN });
      const held = client.act({ observation: observation(1), seed: 1 }); // tie → first endpoint (A behind the gate)
      await waitFor(() => gate.arrivals() === 1);
      assert.deepEqual(client.load(), { [gate.url]: 1, [B.url]: 0 });
      for (let i = 0; i < 5; i++) {
        const a = await client.act({ observation: observation(10 + i), seed: i });
        assert.equal(a.serverId, 'B', 'A is busy, so B takes the work');
        assert.equal(a.endpoint, B.url);
      }
      gate.open();
      const first = await held;
      assert.equal(first.serverId, 'A');
      assert.equal(first.policyVersion, 0);

      // Idle fleet, a burst of 8: in-flight counts rise as requests are sent, so they split evenly.
      const burst = await Promise.all(
        Array.from({ length: 8 }, (_, i) => client.act({ observation: observation(20 + i), seed: i }))
      );
      assert.equal(burst.filter((a) => a.serverId === 'A').length, 4);
      assert.equal(burst.filter((a) => a.serverId === 'B').length, 4);
    } finally {
      await gate.close();
    }
  });

  it('fails over when a server is down, and avoids it afterwards', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const client = new PolicyServerClient({
      endpoints: [dead, B.url],
      token: TEST_TOKEN,
      backoff: fastBackoff,
      cooldownMs: 60_000,
    });
    const first = await client.act({ observation: observation(1), seed: 1 });
    assert.equal(first.serverId, 'B');
    assert.equal(first.attempts, 2, 'the dead server was tried first, then B');
    for (let i = 0; i < 4; i++)
      assert.equal(
        (await client.act({ observation: observation(2), seed: i })).attempts,
        1,
        'the dead server is cooling down'
      );
  });

  it('fails over on a timeout and on a server with another token', async () => {
    const gate = await gateProxy(A.url);
    try {
      const client = new PolicyServerClient({
        endpoints: [gate.url, B.url],
        token: TEST_TOKEN,
        // 2 s, not less: B must answer within it on a loaded CI machine too.
        timeoutMs: 2000,
        backoff: fastBackoff,
      });
      const a = await client.act({ observation: observation(3), seed: 3 });
      assert.equal(a.serverId, 'B');
      assert.equal(a.attempts, 2);
    } finally {
      await gate.close();
    }
    const client = new PolicyServerClient({ endpoints: [C.url, B.url], token: TEST_TOKEN, backoff: fastBackoff });
    const a = await client.act({ observation: observation(4), seed: 4 });
    assert.equal(a.serverId, 'B');
  });

  it('raises PolicyUnavailableError when every server fails, PolicyRequestError for a bad request', async () => {
    const dead1 = `http://127.0.0.1:${await freePort()}`;
    const dead2 = `http://127.0.0.1:${await freePort()}`;
    const client = new PolicyServerClient({
      endpoints: [dead1, dead2],
      token: TEST_TOKEN,
      maxAttempts: 4,
      backoff: fastBackoff,
    });
    await assert.rejects(client.act({ observation: observation(1), seed: 1 }), (err: unknown) => {
      assert.ok(err instanceof PolicyUnavailableError);
      assert.match(err.message, /no policy server answered after 4 attempts/);
      return true;
    });
    const ok = new PolicyServerClient({ endpoints: [B.url], token: TEST_TOKEN });
    await assert.rejects(
      ok.act({ observation: { pngBase64: 'aGVsbG8=', instruction: 'x', fields: [] }, seed: 1 }),
      PolicyRequestError
    );
  });

  it('the EpisodePolicy adapter turns answers into PolicyDecisions with version and server', async () => {
    const factory = embeddedPolicyFactory({ token: TEST_TOKEN });
    const ctx = { endpoints: [A.url, B.url], options: {}, seed: 1 } as unknown as PolicyContext;
    // A policy per call: each answer is an episode's first step (no previous action), so they compare.
    const firstStep = async () => factory(ctx);
    const png = makePng(5);
    const obs = { png, width: 160, height: 160, instruction: 'type hello', fields: ['hello'], step: 0 };
    const d1 = await (await firstStep()).act(obs, { seed: 99, temperature: 1 });
    const d2 = await (await firstStep()).act(obs, { seed: 99, temperature: 1 });
    assert.ok(d1.action);
    assert.equal(d1.actionIndex, d2.actionIndex, 'same seed, same version → same action on either server');
    assert.equal(d1.policyVersion, 0);
    assert.ok(d1.policyServer === 'A' || d1.policyServer === 'B');
    assert.deepEqual(d1.tokenLogProbs, [d1.logProb]);
    assert.ok(d1.logProb < 0 && d1.entropy > 0);
    // Temperature 0 = greedy.
    const g1 = await (await firstStep()).act(obs, { seed: 1, temperature: 0 });
    const g2 = await (await firstStep()).act(obs, { seed: 2, temperature: 0 });
    assert.equal(g1.actionIndex, g2.actionIndex);
  });
});
