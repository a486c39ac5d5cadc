import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as ort from 'onnxruntime-node';
import { buildForwardGraph } from '../../policy/graph-forward';
import { referenceForward } from '../../policy/reference';
import { createInferenceSession, createTrainSession } from '../../policy/session';
import {
  clickQueryPolicySpec,
  defaultPolicySpec,
  hueChannels,
  huePolicySpec,
  legacyPolicySpec,
  maxContextPolicySpec,
  wordQueryPolicySpec,
  MASK_OFF,
  numActions,
  paramCount,
  paramShapes,
  specKey,
  widenSpec,
  type PolicySpec,
} from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import { randomBatch, randomWeights } from './helpers';

/** Max elementwise relative error, with a floor of 1 on the denominator (log-probs are O(1)…O(1e9)). */
function maxRelErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
  return m;
}

async function checkAgainstReference(spec: PolicySpec, seed: number, batch: number): Promise<void> {
  const weights = randomWeights(spec, seed);
  const input = randomBatch(spec, batch, seed + 1);
  const session = await createInferenceSession(spec, weights);
  const out = await session.run(input);
  await session.release();
  const ref = referenceForward(spec, weights, input);
  assert.equal(out.logp.length, batch * numActions(spec));
  assert.ok(maxRelErr(out.logp, ref.logp) < 1e-5, `logp rel err ${maxRelErr(out.logp, ref.logp)}`);
  assert.ok(maxRelErr(out.entropy, ref.entropy) < 1e-5, `entropy rel err ${maxRelErr(out.entropy, ref.entropy)}`);
  // The net must not be trivially uniform, or the comparison proves little.
  const spread =
    Math.max(...Array.from(ref.logp).filter((v) => v > -1e6)) -
    Math.min(...Array.from(ref.logp).filter((v) => v > -1e6));
  assert.ok(spread > 1, `log-prob spread ${spread}`);
}

test('generated forward graph matches the TS reference (default spec, B=5)', async () => {
  await checkAgainstReference(defaultPolicySpec, 11, 5);
});

test('the v1 architecture (legacyPolicySpec: no context, no previous action) still matches', async () => {
  await checkAgainstReference(legacyPolicySpec, 12, 3);
});

test('the global max in the click context (maxContextPolicySpec) matches the reference and moves the logits', async () => {
  await checkAgainstReference(maxContextPolicySpec, 13, 3);
  // The same weights without ctx.max's contribution (W_m = 0) give other log-probs: the path is live.
  const weights = randomWeights(maxContextPolicySpec, 13);
  const input = randomBatch(maxContextPolicySpec, 3, 14);
  const zeroed = { ...weights, 'ctx.max': new Float32Array(weights['ctx.max']!.length) };
  const on = referenceForward(maxContextPolicySpec, weights, input).logp;
  const off = referenceForward(maxContextPolicySpec, zeroed, input).logp;
  assert.ok(maxRelErr(on, off) > 1e-2, `ctx.max changes nothing (${maxRelErr(on, off)})`);
});

test('hue input channels (huePolicySpec) match the reference and reach the logits', async () => {
  await checkAgainstReference(huePolicySpec, 19, 3);
  assert.equal(paramCount(huePolicySpec), paramCount(defaultPolicySpec) + 16 * 4 * 4 * 4, 'conv0 reads 7 channels');
  // Specs without the field keep their checkpoint key.
  assert.equal(specKey({ ...defaultPolicySpec, hueInput: false }), specKey(defaultPolicySpec));
  assert.notEqual(specKey(huePolicySpec), specKey(defaultPolicySpec));
  // Zeroing conv0's weights on the two hue channels changes the log-probs: the channels are live.
  const weights = randomWeights(huePolicySpec, 19);
  const input = randomBatch(huePolicySpec, 3, 20);
  const noHue = Float32Array.from(weights['conv0.weight']!);
  for (let i = 0; i < noHue.length; i++) if (Math.floor(i / 16) % 7 >= 3) noHue[i] = 0; // [16,7,4,4]
  const on = referenceForward(huePolicySpec, weights, input).logp;
  const off = referenceForward(huePolicySpec, { ...weights, 'conv0.weight': noHue }, input).logp;
  assert.ok(maxRelErr(on, off) > 1e-2, `the hue channels change nothing (${maxRelErr(on, off)})`);
});

test('why hue: orange is the midpoint of red and yellow in RGB, yet every page colour is an extreme point in hue', () => {
  // tasks/pages/runtime.js D.COLORS (black has no hue: it maps to ≈ 0).
  const hex = {
    red: '#e6194b',
    green: '#3cb44b',
    blue: '#4363d8',
    yellow: '#ffe119',
    orange: '#f58231',
    purple: '#911eb4',
    cyan: '#42d4f4',
  };
  const rgb = Object.fromEntries(
    Object.entries(hex).map(([k, h]) => [k, [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255)])
  ) as Record<string, number[]>;
  const mid = rgb.red!.map((v, i) => (v + rgb.yellow![i]!) / 2);
  rgb.orange!.forEach((v, i) =>
    assert.ok(Math.abs(v - mid[i]!) < 0.03, `orange ≈ (red + yellow)/2 in RGB: ${rgb.orange} vs ${mid}`)
  );
  // So any linear score w·rgb gives orange about the mean of red's and yellow's: it never beats both by much.
  const hue = Object.fromEntries(Object.entries(rgb).map(([k, [r, g, b]]) => [k, hueChannels(r!, g!, b!)]));
  for (const [name, u] of Object.entries(hue)) {
    const dot = (a: number[], b: number[]) => a.reduce((s, ai, i) => s + ai * b[i]!, 0);
    for (const [other, v] of Object.entries(hue)) {
      if (other === name) continue;
      // Scoring by the colour's own hue channels ranks it first, by a clear margin: first harmonic alone
      // (orange vs yellow, 29° apart: ≈ 0.09) and with the second (≈ 0.3).
      assert.ok(dot(u.slice(0, 2), u.slice(0, 2)) - dot(u.slice(0, 2), v.slice(0, 2)) > 0.05, `${name} vs ${other}`);
      assert.ok(dot(u, u) - dot(u, v) > 0.25, `${name} vs ${other} with the second harmonic`);
    }
  }
  const black = hueChannels(0, 0, 0);
  const white = hueChannels(1, 1, 1);
  assert.ok(Math.hypot(...black) < 1e-9 && Math.hypot(...white) < 1e-9, 'no hue for black and white');
});

test("per-word click queries (wordQueryPolicySpec) match the reference; only the instruction's words count", async () => {
  const spec = wordQueryPolicySpec;
  await checkAgainstReference(spec, 17, 3);
  const weights = randomWeights(spec, 17);
  const input = randomBatch(spec, 3, 18);
  const zeroed = { ...weights, 'wquery.weight': new Float32Array(weights['wquery.weight']!.length) };
  const on = referenceForward(spec, weights, input).logp;
  assert.ok(maxRelErr(on, referenceForward(spec, zeroed, input).logp) > 1e-2, 'wquery.weight changes nothing');
  // A word slot absent from every instruction has no effect, whatever its query row holds.
  const C = 32;
  const absent = Array.from({ length: spec.vocabSize }, (_, v) => v).find((v) =>
    [0, 1, 2].every((b) => input.text[b * spec.vocabSize + v] === 0)
  );
  assert.ok(absent !== undefined, 'the batch uses every word slot: no absent word to test');
  const other = { ...weights, 'wquery.weight': weights['wquery.weight']!.slice() };
  other['wquery.weight'].fill(50, absent * C, (absent + 1) * C);
  assert.deepEqual(referenceForward(spec, other, input).logp, on);
  const session = await createInferenceSession(spec, other);
  const out = await session.run(input);
  await session.release();
  assert.ok(maxRelErr(out.logp, on) < 1e-5, 'the graph lets an absent word score');
});

test('a wider and deeper spec builds, loads and matches the reference', async () => {
  const wide = widenSpec(defaultPolicySpec, 2);
  const spec: PolicySpec = { ...wide, convs: [...wide.convs, { outChannels: 48, kernel: 3, stride: 1, pad: 1 }] };
  assert.ok(paramCount(spec) > 3 * paramCount(defaultPolicySpec));
  await checkAgainstReference(spec, 21, 3);
});

test('a spec whose strided conv skips trailing pixels (output padding) still matches', async () => {
  // 65 + 2·1 − 4 = 63 is odd, so the stride-2 conv never reads the last row/column: 65 → 32 → 16.
  const spec: PolicySpec = { ...defaultPolicySpec, imageSize: 65 };
  await checkAgainstReference(spec, 31, 2);
});

test('masked actions get zero probability and entropy stays finite', async () => {
  const spec = defaultPolicySpec;
  const session = await createInferenceSession(spec, randomWeights(spec, 3));
  const input = randomBatch(spec, 4, 4);
  // Also mask every click cell of sample 0 but one.
  const A = numActions(spec);
  for (let a = 1; a < 256; a++) input.mask[a] = MASK_OFF;
  const { logp, entropy } = await session.run(input);
  for (let i = 0; i < logp.length; i++) {
    if (input.mask[i]! < 0)
      assert.equal(Math.exp(logp[i]!), 0, `masked action ${i % A} of sample ${Math.floor(i / A)}`);
  }
  for (let b = 0; b < 4; b++) {
    let total = 0;
    for (let a = 0; a < A; a++) total += Math.exp(logp[b * A + a]!);
    assert.ok(Math.abs(total - 1) < 1e-5);
    assert.ok(Number.isFinite(entropy[b]!) && entropy[b]! > 0);
  }
  await session.release();
});

test('weights-as-inputs forward equals the initializer forward', async () => {
  const spec = defaultPolicySpec;
  const weights = initWeights(spec, 9);
  const input = randomBatch(spec, 3, 10);
  const inf = await createInferenceSession(spec, weights);
  const trainer = await createTrainSession(spec);
  const a = await inf.run(input);
  const b = await trainer.forward(weights, input);
  assert.ok(maxRelErr(a.logp, b.logp) < 1e-6);
  assert.ok(maxRelErr(a.entropy, b.entropy) < 1e-6);
  await inf.release();
  await trainer.release();
});

test('the initializer graph has no weight inputs; the input graph exposes every weight', async () => {
  const spec = clickQueryPolicySpec;
  const baked = await ort.InferenceSession.create(buildForwardGraph(spec, initWeights(spec, 1)));
  assert.deepEqual([...baked.inputNames].sort(), ['mask', 'obs', 'prev', 'text']);
  assert.deepEqual([...baked.outputNames].sort(), ['entropy', 'logp']);
  const open = await ort.InferenceSession.create(buildForwardGraph(spec));
  assert.equal(open.inputNames.length, 4 + paramShapes(spec).length);
  assert.equal(paramShapes(spec).length, 20); // v1's 13 + prev.embed, 4 ctx tensors, prev.bias (v2) + query.weight (v3)
  await baked.release();
  await open.release();
});
