import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTrainSession } from '../../policy/session';
import { defaultPolicySpec as spec, numActions } from '../../policy/spec';
import { cloneWeights, initWeights } from '../../policy/weights';
import { randomBatch } from './helpers';

test('zero coefficients give zero gradients', async () => {
  const session = await createTrainSession(spec);
  const batch = { ...randomBatch(spec, 2, 1), actions: [3, 4], g: new Float32Array(2), entCoef: new Float32Array(2) };
  const { grads } = await session.gradients(initWeights(spec, 1), batch);
  for (const [name, g] of Object.entries(grads))
    assert.ok(
      g.every((v) => v === 0),
      name
    );
  await session.release();
});

test('behaviour cloning through the gradient path raises the target log-probs (plain SGD)', async () => {
  const session = await createTrainSession(spec);
  const B = 8;
  const input = randomBatch(spec, B, 2);
  const actions = Array.from({ length: B }, (_, b) => (b * 37) % 256); // click cells, always valid
  const batch = { ...input, actions, g: new Float32Array(B).fill(-1 / B), entCoef: new Float32Array(B) };
  let weights = cloneWeights(initWeights(spec, 2));
  const first = await session.gradients(weights, batch);
  const mean = (x: Float32Array): number => x.reduce((a, b) => a + b, 0) / x.length;
  for (let step = 0; step < 30; step++) {
    const { grads } = await session.gradients(weights, batch);
    weights = Object.fromEntries(
      Object.entries(weights).map(([k, w]) => [k, w.map((v, i) => v - 0.1 * grads[k]![i]!)])
    );
  }
  const { logp } = await session.forward(weights, input);
  const after = actions.map((a, b) => logp[b * numActions(spec) + a]!);
  assert.ok(
    mean(Float32Array.from(after)) > mean(first.logpAction) + 1,
    `BC: ${mean(first.logpAction)} → ${mean(Float32Array.from(after))}`
  );
  await session.release();
});

test('train session validates its inputs', async () => {
  const session = await createTrainSession(spec);
  const input = randomBatch(spec, 2, 3);
  const w = initWeights(spec, 3);
  await assert.rejects(
    session.gradients(w, { ...input, actions: [0, 272], g: new Float32Array(2), entCoef: new Float32Array(2) }),
    /out of range/
  );
  await assert.rejects(
    session.gradients(w, { ...input, actions: [0], g: new Float32Array(2), entCoef: new Float32Array(2) }),
    /B=2/
  );
  await assert.rejects(session.forward(w, { ...input, batch: 3 }), /expected/);
  await session.release();
});
