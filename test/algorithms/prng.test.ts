import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError } from '../../algorithms/common';
import { createPrng, hashSeed, shuffled } from '../../algorithms/prng';

test('same seed, same sequence; different seeds differ', () => {
  const a = createPrng(123);
  const b = createPrng(123);
  const c = createPrng(124);
  const xs = Array.from({ length: 5 }, () => a.next());
  assert.deepEqual(
    xs,
    Array.from({ length: 5 }, () => b.next())
  );
  assert.notDeepEqual(
    xs,
    Array.from({ length: 5 }, () => c.next())
  );
  for (const x of xs) assert.ok(x >= 0 && x < 1);
});

test('state() resumes the sequence (continue-as-new)', () => {
  const a = createPrng('campaign-1');
  a.next();
  a.next();
  const resumed = createPrng(a.state());
  assert.deepEqual([a.next(), a.next(), a.next()], [resumed.next(), resumed.next(), resumed.next()]);
});

test('string seeds are hashed with FNV-1a', () => {
  assert.equal(hashSeed(''), 0x811c9dc5);
  assert.equal(hashSeed('a'), 0xe40c292c); // published FNV-1a 32-bit test vector
  assert.deepEqual(createPrng('x').next(), createPrng(hashSeed('x')).next());
});

test('nextInt is uniform-ish and in range; shuffled is a permutation that leaves its input alone', () => {
  const rng = createPrng(9);
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) counts[rng.nextInt(4)]! += 1;
  for (const c of counts) assert.ok(c > 900 && c < 1100, `count ${c}`);
  const input = [1, 2, 3, 4, 5, 6];
  const out = shuffled(input, rng);
  assert.deepEqual([...out].sort(), input);
  assert.deepEqual(input, [1, 2, 3, 4, 5, 6]);
  assert.throws(() => rng.nextInt(0), InvalidArgumentError);
  assert.throws(() => createPrng(1.5), InvalidArgumentError);
});
