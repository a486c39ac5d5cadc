/**
 * The generated forward+backward graph against central finite differences of the float64 TS reference
 * loss L = Σ_b g_b·logp_b[a_b] + c_b·H_b. Two checks per weight tensor: a directional derivative along a
 * random direction (covers every coordinate at once) and a few single coordinates (catches errors that
 * cancel in a projection, e.g. a transposed kernel).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { referenceForward, referenceLoss } from '../../policy/reference';
import { mulberry32, normal } from '../../policy/sampling';
import { createTrainSession, type TrainBatch } from '../../policy/session';
import {
  defaultPolicySpec,
  huePolicySpec,
  legacyPolicySpec,
  maxContextPolicySpec,
  wordQueryPolicySpec,
  numActions,
  paramShapes,
  type PolicySpec,
} from '../../policy/spec';
import { initWeights } from '../../policy/weights';
import { randomBatch, randomWeights, toF64 } from './helpers';

const F32_FLOOR = 1e-6;

async function checkGradients(
  spec: PolicySpec,
  seed: number,
  batchSize: number,
  coordsPerTensor: number
): Promise<void> {
  const rng = mulberry32(seed);
  const weights = randomWeights(spec, seed);
  const input = randomBatch(spec, batchSize, seed + 1);
  const A = numActions(spec);
  // Taken actions among the valid ones; mixed-sign coefficients as in a GRPO batch.
  const actions = Array.from({ length: batchSize }, (_, b) => {
    for (;;) {
      const a = Math.floor(rng() * A);
      if (input.mask[b * A + a] === 0) return a;
    }
  });
  const batch: TrainBatch = {
    ...input,
    actions,
    g: Float32Array.from({ length: batchSize }, () => normal(rng)),
    entCoef: Float32Array.from({ length: batchSize }, () => 0.5 * normal(rng)),
  };
  const session = await createTrainSession(spec);
  const { grads, logpAction } = await session.gradients(weights, batch);
  await session.release();

  const w64 = toF64(weights);
  const loss = (): number => referenceLoss(spec, w64, input, actions, batch.g, batch.entCoef);
  // logp_action output agrees with the reference too.
  const { logp } = referenceForward(spec, w64, input);
  actions.forEach((a, b) =>
    assert.ok(Math.abs(logpAction[b]! - logp[b * A + a]!) < 1e-5 * Math.max(1, Math.abs(logp[b * A + a]!)))
  );

  for (const p of paramShapes(spec)) {
    const grad = grads[p.name]!;
    const w = w64[p.name]!;
    const gradNorm = Math.hypot(...grad);
    assert.ok(gradNorm > 0, `${p.name}: zero gradient (the check would be vacuous)`);

    // Directional derivative along a random unit direction d.
    const d = Float64Array.from({ length: w.length }, () => normal(rng));
    const dNorm = Math.hypot(...d);
    // Small enough that almost no ReLU kink is crossed — the click context's ReLU moves all B·C·G² units
    // with every trunk weight, so 1e-6 already crossed one for seed 101 — and float64 keeps round-off ≈1e-8.
    const eps = 1e-7;
    const base = w.slice();
    let analytic = 0;
    for (let i = 0; i < w.length; i++) {
      d[i]! /= dNorm;
      analytic += grad[i]! * d[i]!;
    }
    for (let i = 0; i < w.length; i++) w[i] = base[i]! + eps * d[i]!;
    const lp = loss();
    for (let i = 0; i < w.length; i++) w[i] = base[i]! - eps * d[i]!;
    const lm = loss();
    w.set(base);
    const fd = (lp - lm) / (2 * eps);
    // + F32_FLOOR: the graph computes in float32, so a tiny gradient (click.bias ≈ 1e-3 here) carries
    // ≈1e-7 of absolute round-off from its sums over B·G² terms.
    assert.ok(
      Math.abs(fd - analytic) <= 1e-4 * gradNorm + F32_FLOOR,
      `${p.name} directional: fd ${fd} vs graph ${analytic} (|grad| ${gradNorm})`
    );

    // Single coordinates: the largest-|grad| entry and a few random ones.
    let top = 0;
    for (let i = 1; i < grad.length; i++) if (Math.abs(grad[i]!) > Math.abs(grad[top]!)) top = i;
    const coords = [
      top,
      ...Array.from({ length: Math.min(coordsPerTensor, w.length) - 1 }, () => Math.floor(rng() * w.length)),
    ];
    for (const i of coords) {
      const h = 1e-7;
      const v = base[i]!;
      w[i] = v + h;
      const up = loss();
      w[i] = v - h;
      const down = loss();
      w[i] = v;
      const fdi = (up - down) / (2 * h);
      const tol = 1e-4 * Math.abs(fdi) + 1e-5 * gradNorm + F32_FLOOR;
      assert.ok(Math.abs(fdi - grad[i]!) <= tol, `${p.name}[${i}]: fd ${fdi} vs graph ${grad[i]} (tol ${tol})`);
    }
  }
}

test('backward graph gradients match finite differences (default spec, B=2)', async () => {
  await checkGradients(defaultPolicySpec, 101, 2, 3);
});

test('backward graph gradients match finite differences with output padding and a 4th conv', async () => {
  const spec: PolicySpec = {
    ...defaultPolicySpec,
    imageSize: 33, // 33 + 2 − 4 = 31 is odd: conv0 skips a row, exercising output_padding and the dW crop
    convs: [
      { outChannels: 8, kernel: 4, stride: 2, pad: 1 },
      { outChannels: 8, kernel: 3, stride: 1, pad: 1 },
      { outChannels: 12, kernel: 3, stride: 1, pad: 1 },
      { outChannels: 12, kernel: 3, stride: 2, pad: 1 }, // 16 → 8, again with a skipped row
    ],
    gridSize: 8,
    textEncoding: 'hash', // words-v1 needs V > 63; the encoding does not change the graph
    vocabSize: 32,
    textEmbed: 4,
  };
  await checkGradients(spec, 202, 2, 4);
});

test('backward graph gradients match finite differences for the v1 architecture (legacyPolicySpec)', async () => {
  await checkGradients(legacyPolicySpec, 303, 2, 3);
});

test('backward graph gradients match finite differences with the global max in the click context', async () => {
  // The max's gradient reaches h only at the cell holding each channel's max: the trunk tensors' checks
  // fail if that routing (or the ctx.max Gemm's) is wrong.
  await checkGradients(maxContextPolicySpec, 404, 2, 3);
});

test('backward graph gradients match finite differences with hue input channels', async () => {
  // conv0's weight gradient reads the 5-channel input (RGB + hue): wrong channels there fail its check.
  await checkGradients(huePolicySpec, 505, 2, 3);
});

test('the global max splits its gradient among tied cells so that it sums to the max gradient (uniform screen)', async () => {
  // On a uniform screen the interior cells of h are equal: every channel's max is tied across them (a plain
  // page background does this). Shifting film.bias moves every cell of a channel alike, so the ties stay and
  // the loss is differentiable along it: the graph's split (1/count per tied cell) must add up to that slope.
  const spec = maxContextPolicySpec;
  const weights = randomWeights(spec, 505);
  const input = randomBatch(spec, 2, 506);
  input.obs.fill(0.5);
  const A = numActions(spec);
  const actions = [3, A - 5];
  const g = Float32Array.from([1, -0.7]);
  const entCoef = Float32Array.from([0.2, 0.1]);
  const session = await createTrainSession(spec);
  const { grads } = await session.gradients(weights, { ...input, actions, g, entCoef });
  await session.release();
  const w64 = toF64(weights);
  const loss = (): number => referenceLoss(spec, w64, input, actions, g, entCoef);
  const rng = mulberry32(507);
  for (const name of ['film.bias', 'ctx.bias']) {
    const w = w64[name]!;
    const grad = grads[name]!;
    const base = w.slice();
    const d = Float64Array.from({ length: w.length }, () => normal(rng));
    const dNorm = Math.hypot(...d);
    let analytic = 0;
    for (let i = 0; i < w.length; i++) analytic += (grad[i]! * d[i]!) / dNorm;
    const eps = 1e-6;
    for (let i = 0; i < w.length; i++) w[i] = base[i]! + (eps * d[i]!) / dNorm;
    const lp = loss();
    for (let i = 0; i < w.length; i++) w[i] = base[i]! - (eps * d[i]!) / dNorm;
    const lm = loss();
    w.set(base);
    const fd = (lp - lm) / (2 * eps);
    const gradNorm = Math.hypot(...grad);
    assert.ok(gradNorm > 0, `${name}: zero gradient`);
    assert.ok(Math.abs(fd - analytic) <= 1e-4 * gradNorm + F32_FLOOR, `${name}: fd ${fd} vs graph ${analytic}`);
  }
});

test('backward graph gradients match finite differences with per-word click queries', async () => {
  // The max over words routes each cell's gradient to its best word's query row (or to the zero floor):
  // wquery.weight's and the trunk's checks fail if that routing is wrong.
  await checkGradients(wordQueryPolicySpec, 606, 2, 3);
});

test("at init (all word queries 0) the first gradient is split evenly among the instruction's words", async () => {
  const spec = wordQueryPolicySpec;
  const weights = initWeights(spec, 707);
  const input = randomBatch(spec, 1, 708);
  const V = spec.vocabSize;
  const C = 32;
  const words = Array.from({ length: V }, (_, v) => v).filter((v) => input.text[v]! > 0);
  assert.ok(words.length >= 2, 'the batch needs several words');
  const session = await createTrainSession(spec);
  const { grads } = await session.gradients(weights, {
    ...input,
    actions: [7],
    g: Float32Array.of(1),
    entCoef: Float32Array.of(0),
  });
  await session.release();
  const dW = grads['wquery.weight']!;
  const row = (v: number): number[] => Array.from(dW.subarray(v * C, (v + 1) * C));
  assert.ok(Math.hypot(...row(words[0]!)) > 1e-6, 'no gradient reaches a present word');
  for (const v of words.slice(1)) assert.deepEqual(row(v), row(words[0]!));
  // The click head's 1×1 weight gets Σ_cells dclick·h'(cell); each of the k words and the floor gets 1/(k+1).
  const share = Array.from(grads['click.weight']!, (x) => x / (words.length + 1));
  row(words[0]!).forEach((x, c) =>
    assert.ok(Math.abs(x - share[c]!) <= 1e-5 * Math.max(1, Math.abs(x)), `channel ${c}`)
  );
  for (let v = 0; v < V; v++)
    if (!words.includes(v))
      assert.ok(
        row(v).every((x) => x === 0),
        `absent word ${v}`
      );
});
