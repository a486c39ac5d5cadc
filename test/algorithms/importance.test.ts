import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import { isWeightStats, truncatedIsWeight } from '../../algorithms/importance';
import { assertClose } from './finite-difference';

test('trainer finds the action MORE likely than the sampler: ratio e^0.5 = 1.6487 is cut to C = 1', () => {
  assert.deepEqual(truncatedIsWeight(-1, -1.5), { weight: 1, truncated: true });
});

test('trainer finds the action LESS likely: w = exp(−2 − (−1)) = e^−1 = 0.3679, kept', () => {
  const w = truncatedIsWeight(-2, -1);
  assertClose(w.weight, Math.exp(-1));
  assertClose(w.weight, 0.36787944, 'hand', 1e-8);
  assert.equal(w.truncated, false);
});

test('equal log-probs give exactly 1, not counted as truncated', () => {
  assert.deepEqual(truncatedIsWeight(-0.3, -0.3), { weight: 1, truncated: false });
});

test('missing behaviour log-prob → w = 1 (min(1, C) for a cap below 1)', () => {
  assert.deepEqual(truncatedIsWeight(-1, null), { weight: 1, truncated: false });
  assert.deepEqual(truncatedIsWeight(-1, undefined), { weight: 1, truncated: false });
  assert.deepEqual(truncatedIsWeight(-1, null, 0.5), { weight: 0.5, truncated: true });
  // 0 is a real log-prob (probability 1), not "missing": exp(−1 − 0) = 0.3679
  assertClose(truncatedIsWeight(-1, 0).weight, Math.exp(-1));
});

test('other caps and overflow', () => {
  assertClose(truncatedIsWeight(-1, -1.5, 2).weight, Math.exp(0.5)); // 1.6487 < 2: kept
  assert.deepEqual(truncatedIsWeight(-1, -1.5, 1.2), { weight: 1.2, truncated: true });
  // exp(1000) overflows to Infinity; min(Infinity, C) = C
  assert.deepEqual(truncatedIsWeight(0, -1000), { weight: 1, truncated: true });
  // exp(−1000) underflows to 0: a fully down-weighted sample
  assert.deepEqual(truncatedIsWeight(-1000, 0), { weight: 0, truncated: false });
});

test('statistics: mean, min, truncated fraction', () => {
  // weights 1 (truncated), e^−1 = 0.3679, 1 (missing) → mean = 2.3679/3 = 0.78929, min 0.3679, 1/3 truncated
  const stats = isWeightStats([truncatedIsWeight(-1, -1.5), truncatedIsWeight(-2, -1), truncatedIsWeight(-1, null)]);
  assert.equal(stats.count, 3);
  assertClose(stats.mean, (2 + Math.exp(-1)) / 3);
  assertClose(stats.mean, 0.78929315, 'hand', 1e-8);
  assertClose(stats.min, Math.exp(-1));
  assertClose(stats.truncatedFraction, 1 / 3);
  assert.deepEqual(isWeightStats([]), { count: 0, mean: 1, min: 1, truncatedFraction: 0 });
});

test('non-finite log-probs and bad caps are refused', () => {
  assert.throws(() => truncatedIsWeight(NaN, -1), NonFiniteValueError);
  assert.throws(() => truncatedIsWeight(-1, NaN), NonFiniteValueError);
  assert.throws(() => truncatedIsWeight(-1, Infinity), NonFiniteValueError);
  assert.throws(() => truncatedIsWeight(-1, -1, 0), InvalidArgumentError);
});
