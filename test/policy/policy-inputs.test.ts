/**
 * The spec-v2 policy inputs (issue 14): click context (a click logit sees the whole page) and the
 * previous-action input (layout, effect on the repeated action, engine wiring).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodePreviousAction } from '../../policy/observation';
import { referenceForward } from '../../policy/reference';
import { createInferenceSession, type PolicyBatch } from '../../policy/session';
import {
  defaultPolicySpec,
  IMAGE_CHANNELS,
  legacyPolicySpec,
  numActions,
  numCells,
  prevWidth,
  type PolicySpec,
} from '../../policy/spec';
import { initWeights, REPEAT_NOOP_PRIOR } from '../../policy/weights';
import { PolicyEngine } from '../../rollout/engine';
import type { ObjectStore } from '../../storage/object-store';
import { randomBatch, randomWeights, toF64 } from './helpers';

/** The batch with the bottom-right 16×16 pixels (of 64) of every channel set to `value` (black or white). */
function withFarCorner(spec: PolicySpec, b: PolicyBatch, value: number): PolicyBatch {
  const S = spec.imageSize;
  const obs = b.obs.slice();
  for (let c = 0; c < IMAGE_CHANNELS; c++)
    for (let y = S - 16; y < S; y++) for (let x = S - 16; x < S; x++) obs[(c * S + y) * S + x] = value;
  return { ...b, obs };
}

/**
 * How much logit(cell 0) − logit(cell 2) — both in the top-left corner, so the softmax normaliser cancels —
 * moves when the opposite corner's pixels change, by the ONNX graph and by the JS reference.
 */
async function farCornerEffect(spec: PolicySpec): Promise<{ onnx: number; reference: number }> {
  const weights = randomWeights(spec, 5);
  const base = withFarCorner(spec, randomBatch(spec, 1, 6), 0);
  const changed = withFarCorner(spec, base, 1);
  const diff = (logp: ArrayLike<number>) => logp[0]! - logp[2]!;
  const session = await createInferenceSession(spec, weights);
  const onnx = diff((await session.run(changed)).logp) - diff((await session.run(base)).logp);
  await session.release();
  const w64 = toF64(weights);
  const reference = diff(referenceForward(spec, w64, changed).logp) - diff(referenceForward(spec, w64, base).logp);
  return { onnx, reference };
}

test('click context: a top-left click logit depends on the bottom-right pixels (v1: it cannot)', async () => {
  const v2 = await farCornerEffect(defaultPolicySpec);
  assert.ok(Math.abs(v2.reference) > 1e-2, `reference: the far corner moved the logit by ${v2.reference}`);
  assert.ok(Math.abs(v2.onnx - v2.reference) < 1e-4, `onnx ${v2.onnx} vs reference ${v2.reference}`);
  // The same measurement on v1's architecture: the 18-px receptive field never reaches the far corner.
  const v1 = await farCornerEffect(legacyPolicySpec);
  assert.ok(Math.abs(v1.reference) < 1e-12, `v1 reference ${v1.reference}`);
  assert.ok(Math.abs(v1.onnx) < 1e-4, `v1 onnx ${v1.onnx}`);
});

test('encodePreviousAction: one-hot in the changed or unchanged half, zeros on the first step', () => {
  const spec = defaultPolicySpec;
  const A = numActions(spec);
  assert.equal(prevWidth(spec), 2 * A);
  assert.ok(encodePreviousAction(undefined, spec).every((v) => v === 0));
  const changed = encodePreviousAction({ actionIndex: 17, changed: true }, spec);
  const same = encodePreviousAction({ actionIndex: 17, changed: false }, spec);
  assert.deepEqual(
    [...changed.entries()].filter(([, v]) => v !== 0),
    [[17, 1]]
  );
  assert.deepEqual(
    [...same.entries()].filter(([, v]) => v !== 0),
    [[A + 17, 1]]
  );
  assert.throws(() => encodePreviousAction({ actionIndex: A, changed: true }, spec), /outside the 272 actions/);
});

test('an action that changed nothing is no longer the greedy choice; one that changed the screen may be', async () => {
  const spec = defaultPolicySpec;
  const A = numActions(spec);
  const session = await createInferenceSession(spec, initWeights(spec, 0));
  const base = randomBatch(spec, 1, 8);
  const run = async (prev?: Float32Array) =>
    (await session.run({ ...base, prev: prev ?? new Float32Array(2 * A) })).logp;
  const argmax = (v: Float32Array) => v.indexOf(Math.max(...v.subarray(0, A)));
  const first = await run();
  const greedy = argmax(first);
  assert.ok(greedy < numCells(spec), `greedy first action ${greedy} is a click cell`);
  const noop = await run(encodePreviousAction({ actionIndex: greedy, changed: false }, spec));
  // The repeat prior lowers that one action against the rest (the prev embedding moves all logits a bit).
  const drop = first[greedy]! - first[greedy === 0 ? 1 : 0]! - (noop[greedy]! - noop[greedy === 0 ? 1 : 0]!);
  assert.ok(Math.abs(drop + REPEAT_NOOP_PRIOR) < 0.5, `relative logit drop ${drop}`);
  assert.notEqual(argmax(noop), greedy, 'greedy repeats the action that changed nothing');
  const moved = await run(encodePreviousAction({ actionIndex: greedy, changed: true }, spec));
  const shift = first[greedy]! - first[greedy === 0 ? 1 : 0]! - (moved[greedy]! - moved[greedy === 0 ? 1 : 0]!);
  assert.ok(Math.abs(shift) < 0.5, `a previous action that changed the screen is not penalised at init (${shift})`);
  await session.release();
});

test('the policy engine feeds `previous` to the network (and a missing one as a first step)', async () => {
  const spec = defaultPolicySpec;
  const engine = new PolicyEngine({ serverId: 't', spec, store: {} as ObjectStore, maxBatch: 4, maxWaitMs: 0 });
  await engine.loadWeights('c', 1, initWeights(spec, 0));
  const S = spec.imageSize;
  const image = Float32Array.from({ length: 3 * S * S }, (_, i) => ((i * 7919) % 255) / 255);
  const obs = { image, width: 160, height: 160, instruction: 'Click the red box.', fields: ['red'] };
  const opts = { seed: 1, temperature: 1, greedy: true };
  const first = await engine.act(obs, opts);
  const again = await engine.act({ ...obs, previous: { actionIndex: first.actionIndex, changed: false } }, opts);
  assert.notEqual(again.actionIndex, first.actionIndex);
  // Rows with and without `previous` in one batch: the row without it must not see the other's values.
  const [a, b] = await Promise.all([
    engine.act({ ...obs, previous: { actionIndex: first.actionIndex, changed: false } }, opts),
    engine.act(obs, opts),
  ]);
  assert.equal(a.actionIndex, again.actionIndex);
  assert.equal(b.actionIndex, first.actionIndex);
  await assert.rejects(engine.act({ ...obs, previous: { actionIndex: 999, changed: true } }, opts), /outside/);
  await engine.close();
});
