import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  NonFiniteGradientError,
  adamStateFromTensors,
  adamStateToTensors,
  adamStep,
  createAdamState,
  globalGradNorm,
} from '../../algorithms/adam';
import { InvalidArgumentError } from '../../algorithms/common';
import { assertClose } from './finite-difference';

const f32 = (...xs: number[]) => Float32Array.from(xs);
const plain = { learningRate: 0.1, weightDecay: 0, maxGradNorm: null } as const;

test('two hand-computed Adam steps (β1 0.9, β2 0.999, ε 1e-8)', () => {
  const params = { w: f32(1) };
  const state = createAdamState(params);
  // step 1, g = 0.5: m = 0.1·0.5 = 0.05, v = 0.001·0.25 = 0.00025
  // m̂ = 0.05/0.1 = 0.5, v̂ = 0.00025/0.001 = 0.25, update = 0.1·0.5/(0.5 + 1e-8) ≈ 0.1 → w = 0.9
  const r1 = adamStep(params, { w: f32(0.5) }, state, plain);
  assert.equal(r1.step, 1);
  assertClose(params.w[0] as number, 0.9, 'w after step 1', 1e-7);
  assertClose(state.m.w?.[0] as number, 0.05, 'm', 1e-7);
  assertClose(state.v.w?.[0] as number, 0.00025, 'v', 1e-7);
  // step 2, g = −0.5: m = 0.9·0.05 − 0.05 = −0.005; v = 0.999·0.00025 + 0.001·0.25 = 0.00049975
  // m̂ = −0.005/0.19 = −0.0263158; v̂ = 0.00049975/0.001999 = 0.25; update = 0.1·(−0.0263158)/0.5 = −0.00526316
  // w = 0.9 + 0.00526316 = 0.90526316
  const r2 = adamStep(params, { w: f32(-0.5) }, state, plain);
  assert.equal(r2.step, 2);
  assertClose(params.w[0] as number, 0.90526316, 'w after step 2', 1e-6);
});

test('decoupled weight decay: θ ← θ·(1 − lr·λ) even with a zero gradient', () => {
  // lr 0.1, λ 0.1: 1·(1 − 0.01) = 0.99 (m = 0 → no Adam update)
  const params = { w: f32(1, -2) };
  adamStep(params, { w: f32(0, 0) }, createAdamState(params), { ...plain, weightDecay: 0.1 });
  assertClose(params.w[0] as number, 0.99, 'w0', 1e-7);
  assertClose(params.w[1] as number, -1.98, 'w1', 1e-7);
});

test('global-norm clipping over all parameters (DART grad clip 2.0)', () => {
  // grads a = [3], b = [4] → ‖g‖ = 5; scale = 2/(5 + 1e-6) = 0.39999992
  // first-step m = 0.1·g·scale: m_a = 0.12, m_b = 0.16
  const params = { a: f32(0), b: f32(0) };
  const state = createAdamState(params);
  const r = adamStep(params, { a: f32(3), b: f32(4) }, state, { learningRate: 0.1, weightDecay: 0 });
  assert.equal(r.gradNorm, 5);
  assertClose(r.clipScale, 2 / (5 + 1e-6));
  assertClose(state.m.a?.[0] as number, 0.12, 'm_a', 1e-6);
  assertClose(state.m.b?.[0] as number, 0.16, 'm_b', 1e-6);
  // a gradient under the limit is not scaled
  const small = adamStep(params, { a: f32(0.3), b: f32(0.4) }, state, { learningRate: 0.1 });
  assert.equal(small.clipScale, 1);
  assertClose(globalGradNorm({ a: f32(0.3), b: f32(0.4) }), 0.5, 'norm', 1e-7);
});

test('NaN / Infinity gradients are refused and nothing changes', () => {
  const params = { a: f32(1, 2), b: f32(3) };
  const state = createAdamState(params);
  adamStep(params, { a: f32(0.1, 0.2), b: f32(0.3) }, state, plain);
  const before = { a: params.a.slice(), b: params.b.slice(), m: state.m.a?.slice(), step: state.step };
  for (const bad of [NaN, Infinity, -Infinity]) {
    assert.throws(
      () => adamStep(params, { a: f32(0.1, 0.2), b: f32(bad) }, state, plain),
      (e: unknown) => e instanceof NonFiniteGradientError && e.parameter === 'b' && e.index === 0
    );
  }
  assert.deepEqual(params.a, before.a);
  assert.deepEqual(params.b, before.b);
  assert.deepEqual(state.m.a, before.m);
  assert.equal(state.step, before.step);
});

test('mismatched names or shapes and bad options are refused', () => {
  const params = { a: f32(1, 2) };
  const state = createAdamState(params);
  assert.throws(() => adamStep(params, { b: f32(1, 2) }, state), InvalidArgumentError);
  assert.throws(() => adamStep(params, { a: f32(1) }, state), InvalidArgumentError);
  assert.throws(() => adamStep(params, { a: f32(1, 2) }, state, { beta1: 1 }), InvalidArgumentError);
  assert.throws(() => adamStep(params, { a: f32(1, 2) }, state, { maxGradNorm: 0 }), InvalidArgumentError);
});

test('state round-trips through tensors and the resumed run matches bit for bit', () => {
  const grads = (k: number) => ({ a: f32(Math.sin(k), Math.cos(k)), b: f32(0.1 * k) });
  const options = { learningRate: 0.01 };
  const paramsA = { a: f32(0.5, -0.5), b: f32(1) };
  const stateA = createAdamState(paramsA);
  for (let k = 1; k <= 3; k++) adamStep(paramsA, grads(k), stateA, options);

  const saved = adamStateToTensors(stateA);
  assert.equal(saved.step, 3);
  assert.deepEqual(Object.keys(saved.tensors).sort(), ['m.a', 'm.b', 'v.a', 'v.b']);
  const paramsB = { a: paramsA.a.slice(), b: paramsA.b.slice() };
  const stateB = adamStateFromTensors(saved.step, saved.tensors, paramsB);

  for (let k = 4; k <= 6; k++) {
    adamStep(paramsA, grads(k), stateA, options);
    adamStep(paramsB, grads(k), stateB, options);
  }
  assert.deepEqual(paramsB, paramsA);
  assert.equal(stateB.step, 6);

  assert.throws(() => adamStateFromTensors(3, { 'm.a': f32(0, 0) }, paramsB), InvalidArgumentError);
  assert.throws(
    () => adamStateFromTensors(3, { ...saved.tensors, extra: f32(1) }, { a: paramsB.a, b: paramsB.b }),
    InvalidArgumentError
  );
});
