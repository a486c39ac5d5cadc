import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import { ppoClippedSurrogate, type PpoOptions } from '../../algorithms/ppo';
import { assertClose, assertDerivative } from './finite-difference';

/** Call with a target ratio ρ: logp_old = −1, logp = −1 + ln ρ. */
function atRatio(rho: number, advantage: number, options?: Partial<PpoOptions>) {
  return ppoClippedSurrogate(-1 + Math.log(rho), -1, advantage, options);
}

test('ratio 1: L = −A, dL/dlogp = −A·ρ = −A', () => {
  const t = ppoClippedSurrogate(-0.7, -0.7, 2);
  assert.deepEqual(t, { loss: -2, dLossDLogp: -2, ratio: 1, clipped: false, dualClipped: false });
});

test('A > 0, ρ = 1.5 > 1 + 0.28: clipped at −A·1.28, no gradient', () => {
  // L1 = −1.5, L2 = −1.28, max = −1.28 (L2 > L1 → clipped)
  const t = atRatio(1.5, 1);
  assertClose(t.loss, -1.28);
  assert.equal(t.dLossDLogp, 0);
  assert.equal(t.clipped, true);
});

test('A > 0, ρ = 0.5 below 1 − 0.1: NOT clipped (pessimistic bound keeps the gradient)', () => {
  // L1 = −0.5, L2 = −0.9, max = −0.5 = L1; dL/dlogp = −A·ρ = −0.5
  const t = atRatio(0.5, 1);
  assertClose(t.loss, -0.5);
  assertClose(t.dLossDLogp, -0.5);
  assert.equal(t.clipped, false);
});

test('A < 0, ρ = 0.5: clipped at −A·0.9 = 0.9', () => {
  // L1 = 0.5, L2 = 0.9 → clipped, constant
  const t = atRatio(0.5, -1);
  assertClose(t.loss, 0.9);
  assert.equal(t.dLossDLogp, 0);
  assert.equal(t.clipped, true);
});

test('A < 0 inside the clip range and between 1 + ε_high and c', () => {
  // ρ = 1.2: L1 = L2 = 1.2, grad = −A·ρ = 1.2
  let t = atRatio(1.2, -1);
  assertClose(t.loss, 1.2);
  assertClose(t.dLossDLogp, 1.2);
  assert.equal(t.clipped, false);
  // ρ = 2 with A = −1: L1 = 2 > L2 = 1.28 → max = 2; below the dual cap −A·c = 10; grad = 2
  t = atRatio(2, -1);
  assertClose(t.loss, 2);
  assertClose(t.dLossDLogp, 2);
  assert.equal(t.dualClipped, false);
});

test('dual clip: A < 0 and ρ > c caps the loss at −A·c with no gradient', () => {
  // ρ = e³ = 20.0855: L = 20.0855 > 10 → L = 10, dual clipped
  const t = ppoClippedSurrogate(2, -1, -1);
  assertClose(t.ratio, Math.exp(3));
  assert.equal(t.loss, 10);
  assert.equal(t.dLossDLogp, 0);
  assert.equal(t.dualClipped, true);
  // dual clip disabled: the loss follows ρ
  const off = ppoClippedSurrogate(2, -1, -1, { dualClip: null });
  assertClose(off.loss, Math.exp(3));
  assertClose(off.dLossDLogp, Math.exp(3));
  // the dual clip never applies to A > 0
  assert.equal(ppoClippedSurrogate(2, -1, 1).dualClipped, false);
});

test('log-ratio clamp at ±20 stops the gradient', () => {
  // logp − logp_old = 25 → ρ = e²⁰; A = −2: L = 2e²⁰ → dual clip → 20
  const big = ppoClippedSurrogate(24, -1, -2);
  assertClose(big.ratio, Math.exp(20));
  assert.equal(big.loss, 20);
  // logp − logp_old = −25 with A = 1: ρ = e⁻²⁰, L = max(−e⁻²⁰, −0.9) = −e⁻²⁰, gradient blocked by the clamp
  const small = ppoClippedSurrogate(-26, -1, 1);
  assertClose(small.loss, -Math.exp(-20));
  assert.equal(small.dLossDLogp, 0);
});

test('useClip false: plain −A·ρ surrogate', () => {
  const t = atRatio(1.5, 1, { useClip: false });
  assertClose(t.loss, -1.5);
  assertClose(t.dLossDLogp, -1.5);
  assert.equal(t.clipped, false);
  const neg = ppoClippedSurrogate(2, -1, -1, { useClip: false }); // ρ = e³, no dual clip either
  assertClose(neg.loss, Math.exp(3));
});

test('zero advantage: zero loss and gradient', () => {
  const t = atRatio(1.7, 0);
  assert.equal(Math.abs(t.loss), 0);
  assert.equal(Math.abs(t.dLossDLogp), 0);
});

test('analytic dL/dlogp matches finite differences away from the kinks', () => {
  const kinks = [Math.log(0.9), Math.log(1.28), Math.log(10)];
  for (const useClip of [true, false]) {
    for (const A of [-3, -1, -0.2, 0.4, 1, 2.5]) {
      for (let logRatio = -3; logRatio <= 3; logRatio += 0.137) {
        if (kinks.some((k) => Math.abs(logRatio - k) < 1e-3)) continue;
        const logpOld = -1.3;
        const f = (logp: number) => ppoClippedSurrogate(logp, logpOld, A, { useClip }).loss;
        const t = ppoClippedSurrogate(logpOld + logRatio, logpOld, A, { useClip });
        assertDerivative(t.dLossDLogp, f, logpOld + logRatio, `A=${A} Δ=${logRatio.toFixed(3)} clip=${useClip}`);
      }
    }
  }
});

test('non-finite inputs and bad options are refused', () => {
  assert.throws(() => ppoClippedSurrogate(NaN, -1, 1), NonFiniteValueError);
  assert.throws(() => ppoClippedSurrogate(-1, -Infinity, 1), NonFiniteValueError);
  assert.throws(() => ppoClippedSurrogate(-1, -1, Infinity), NonFiniteValueError);
  assert.throws(() => ppoClippedSurrogate(-1, -1, 1, { clipLow: 1 }), InvalidArgumentError);
  assert.throws(() => ppoClippedSurrogate(-1, -1, 1, { dualClip: 0.5 }), InvalidArgumentError);
  assert.throws(() => ppoClippedSurrogate(-1, -1, 1, { clipHigh: -0.1 }), InvalidArgumentError);
});
