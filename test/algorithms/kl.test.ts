import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NonFiniteValueError } from '../../algorithms/common';
import { lowVarKl, meanApproxKl } from '../../algorithms/kl';
import { assertClose, assertDerivative } from './finite-difference';

test('identical policies: KL 0, gradient 0', () => {
  const t = lowVarKl(-1.2, -1.2);
  assert.equal(t.kl, 0);
  assert.equal(Math.abs(t.dKlDLogp), 0);
});

test('ref − logp = 1: kl = e − 1 − 1 = 0.71828, dkl/dlogp = 1 − e = −1.71828', () => {
  const t = lowVarKl(-2, -1);
  assertClose(t.kl, Math.E - 2);
  assertClose(t.kl, 0.71828183, 'hand', 1e-8);
  assertClose(t.dKlDLogp, 1 - Math.E);
});

test('ref − logp = −1: kl = e^−1 + 1 − 1 = 0.36788, dkl/dlogp = 1 − e^−1 = 0.63212', () => {
  const t = lowVarKl(-1, -2);
  assertClose(t.kl, Math.exp(-1));
  assertClose(t.dKlDLogp, 1 - Math.exp(-1));
  assertClose(t.dKlDLogp, 0.63212056, 'hand', 1e-8);
});

test('verl clamps: estimate capped at 10, log ratio at ±20, no gradient when capped', () => {
  // d = 5: e⁵ − 5 − 1 = 142.4 → 10
  assert.deepEqual(lowVarKl(-6, -1), { kl: 10, dKlDLogp: 0 });
  // d = −11: e⁻¹¹ + 11 − 1 = 10.0000167 → 10
  assert.deepEqual(lowVarKl(0, -11), { kl: 10, dKlDLogp: 0 });
  // d = −9: e⁻⁹ + 8 = 8.000123, inside; gradient 1 − e⁻⁹
  const inside = lowVarKl(0, -9);
  assertClose(inside.kl, Math.exp(-9) + 8);
  assertClose(inside.dKlDLogp, 1 - Math.exp(-9));
  // d = 30 → clamped to 20 → e²⁰ − 21 → 10
  assert.deepEqual(lowVarKl(-31, -1), { kl: 10, dKlDLogp: 0 });
  // custom clamps
  assert.equal(lowVarKl(-6, -1, { klClamp: 1000 }).kl, Math.exp(5) - 6);
});

test('analytic dkl/dlogp matches finite differences', () => {
  const ref = -1.1;
  for (let d = -8; d <= 2.4; d += 0.173) {
    const logp = ref - d;
    assertDerivative(lowVarKl(logp, ref).dKlDLogp, (x) => lowVarKl(x, ref).kl, logp, `d=${d.toFixed(3)}`);
  }
});

test('k3 is non-negative and non-finite inputs are refused', () => {
  for (let d = -20; d <= 20; d += 0.5) assert.ok(lowVarKl(-d, 0).kl >= 0);
  assert.throws(() => lowVarKl(NaN, -1), NonFiniteValueError);
  assert.throws(() => lowVarKl(-1, -Infinity), NonFiniteValueError);
});

test('meanApproxKl: k3 of KL(π_old ‖ π_θ) — 0 when unchanged, hand values otherwise, never negative', () => {
  assert.equal(meanApproxKl([-1, -2, -0.5], [-1, -2, -0.5]), 0);
  // logp − logpOld = +1: e − 1 − 1 = 0.718282; −1: e⁻¹ − 1 + 1 = 0.367879; mean 0.543081
  assertClose(meanApproxKl([-2, -1], [-1, -2]), (Math.E - 2 + Math.exp(-1)) / 2);
  assertClose(meanApproxKl([-2, -1], [-1, -2]), 0.54308063, 'hand', 1e-8);
  assert.equal(meanApproxKl([], []), 0);
  for (const d of [-3, -0.1, 0.2, 4]) assert.ok(meanApproxKl([0], [d]) > 0, `d = ${d}`);
});

test('meanApproxKl: the log ratio is clamped at ±20; mismatched lengths and NaN are refused', () => {
  assertClose(meanApproxKl([-50], [0]), Math.exp(20) - 21);
  assertClose(meanApproxKl([0], [-50]), Math.exp(-20) + 19);
  assert.throws(() => meanApproxKl([0, 1], [0]), /2 old log-probs for 1 new/);
  assert.throws(() => meanApproxKl([0], [Number.NaN]), NonFiniteValueError);
});
