import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mulberry32, sampleAction, seedFrom } from '../../policy/sampling';

const logp = Float32Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.2), -1e9]);

test('mulberry32 is deterministic and uniform-ish', () => {
  const a = mulberry32(1);
  const b = mulberry32(1);
  const xs = Array.from({ length: 1000 }, () => a());
  assert.deepEqual(
    xs,
    Array.from({ length: 1000 }, () => b())
  );
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  assert.ok(Math.abs(xs.reduce((s, x) => s + x, 0) / 1000 - 0.5) < 0.05);
});

test('the same seed gives the same draw; frequencies follow the policy; masked never drawn', () => {
  assert.deepEqual(sampleAction(logp, { seed: 5 }), sampleAction(logp, { seed: 5 }));
  const counts = [0, 0, 0, 0];
  const rng = mulberry32(9);
  for (let i = 0; i < 20_000; i++) counts[sampleAction(logp, { rng }).index]!++;
  assert.equal(counts[3], 0);
  [0.5, 0.3, 0.2].forEach((p, i) => assert.ok(Math.abs(counts[i]! / 20_000 - p) < 0.015, `action ${i}: ${counts[i]}`));
});

test('temperature reshapes the sampling distribution and reports its log-prob; greedy is argmax', () => {
  const s = sampleAction(logp, { seed: 1, temperature: 0.5 });
  // p^(1/T) renormalised: 0.25, 0.09, 0.04 over 0.38.
  const expected = [0.25, 0.09, 0.04].map((v) => Math.log(v / 0.38));
  assert.ok(Math.abs(s.sampleLogp - expected[s.index]!) < 1e-6);
  assert.ok(Math.abs(s.logp - logp[s.index]!) < 1e-7);
  const t1 = sampleAction(logp, { seed: 1 });
  assert.ok(Math.abs(t1.sampleLogp - t1.logp) < 1e-6);
  assert.deepEqual(sampleAction(logp, { greedy: true }), { index: 0, logp: logp[0], sampleLogp: 0 });
  assert.throws(() => sampleAction(logp, { temperature: 0 }), /temperature/);
});

test('seedFrom is stable and separates steps', () => {
  assert.equal(seedFrom('traj-1', 0), seedFrom('traj-1', 0));
  assert.notEqual(seedFrom('traj-1', 0), seedFrom('traj-1', 1));
});
