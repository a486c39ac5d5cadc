import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import { highEntropyMask, selectionCount } from '../../algorithms/entropy-mask';

test('top 80 % of 5 steps: k = floor(0.8 × 5) = 4, the lowest-entropy step is dropped', () => {
  assert.deepEqual([...highEntropyMask([0.5, 2.0, 1.0, 1.5, 0.1])], [1, 1, 1, 1, 0]);
});

test('k = floor(0.8 × 10) = 8 of 10', () => {
  const entropies = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4, 0.5, 0.05];
  // the two lowest are 0.05 (index 9) and 0.1 (index 1)
  assert.deepEqual([...highEntropyMask(entropies)], [1, 0, 1, 1, 1, 1, 1, 1, 1, 0]);
});

test('ties are broken by input order (earlier sample wins), deterministically', () => {
  // k = floor(0.6 × 5) = 3
  assert.deepEqual([...highEntropyMask([1, 1, 1, 1, 1], { topFraction: 0.6 })], [1, 1, 1, 0, 0]);
  assert.deepEqual([...highEntropyMask([0, 1, 1, 1, 2], { topFraction: 0.6 })], [0, 1, 1, 0, 1]);
});

test('selection count: floor with a float guard and a floor of minSelected', () => {
  assert.equal(selectionCount(5, 0.8), 4);
  assert.equal(selectionCount(384, 0.8), 307); // 307.2 → 307, DART's mini-batch
  assert.equal(selectionCount(100, 0.29), 29); // 0.29 × 100 = 28.999999999999996 in floats
  assert.equal(selectionCount(1, 0.8), 1); // floor(0.8) = 0, raised to minSelected 1
  assert.equal(selectionCount(1, 0.8, 0), 0); // the bare formula
  assert.equal(selectionCount(0, 0.8), 0);
  assert.deepEqual([...highEntropyMask([0.3])], [1]);
  assert.deepEqual([...highEntropyMask([0.3], { minSelected: 0 })], [0]);
});

test("scope 'group' counts k per group; 'batch' over everything", () => {
  const entropies = [3, 1, 2, 5, 4];
  const groups = ['a', 'a', 'a', 'b', 'b'];
  // group a: k = floor(0.5 × 3) = 1 → entropy 3 (index 0); group b: k = floor(0.5 × 2) = 1 → 5 (index 3)
  assert.deepEqual([...highEntropyMask(entropies, { topFraction: 0.5, scope: 'group' }, groups)], [1, 0, 0, 1, 0]);
  // batch: k = floor(0.5 × 5) = 2 → entropies 5 and 4, both in group b
  assert.deepEqual([...highEntropyMask(entropies, { topFraction: 0.5 })], [0, 0, 0, 1, 1]);
});

test('fraction 1 keeps everything; empty input gives an empty mask', () => {
  assert.deepEqual([...highEntropyMask([0.1, 0, 3], { topFraction: 1 })], [1, 1, 1]);
  assert.equal(highEntropyMask([]).length, 0);
});

test('bad input is refused', () => {
  assert.throws(() => highEntropyMask([0.1, NaN]), NonFiniteValueError);
  assert.throws(() => highEntropyMask([0.1, Infinity]), NonFiniteValueError);
  assert.throws(() => highEntropyMask([0.1], { topFraction: 0 }), InvalidArgumentError);
  assert.throws(() => highEntropyMask([0.1], { topFraction: 1.5 }), InvalidArgumentError);
  assert.throws(() => highEntropyMask([0.1, 0.2], { scope: 'group' }), InvalidArgumentError);
  assert.throws(() => highEntropyMask([0.1, 0.2], { scope: 'group' }, ['a']), InvalidArgumentError);
});
