import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import { computeLoss, type LossConfig, type LossSample } from '../../algorithms/loss';
import { createPrng } from '../../algorithms/prng';
import { TrainerSchema } from '../../schemas/config';
import { assertClose, assertDerivative } from './finite-difference';

/*
 * Three hand-computed samples (β = 0.1, C = 1, ε = 0.1/0.28), selection off:
 *  s0: ρ = 1, A = 1            → L = −1,             dL = −1; w = min(e^{0.5}, 1) = 1 (truncated); KL 0
 *  s1: ρ = 1, A = −0.5         → L = 0.5,            dL = 0.5; w = e^{−1} = 0.36788; ref − logp = 1:
 *                                KL = e − 2 = 0.71828, dKL = 1 − e = −1.71828
 *  s2: ρ = 1.5, A = 2          → clipped, L = −2·1.28 = −2.56, dL = 0; behaviour missing → w = 1; KL 0
 * total = (1/3)[−1 + 0.36788·0.5 − 2.56 + 0.1·0.71828] = (1/3)(−3.30423) = −1.10141
 * g0 = (1/3)(−1) = −0.33333
 * g1 = (1/3)(0.36788·0.5 + 0.1·(−1.71828)) = (1/3)(0.18394 − 0.17183) = 0.0040372
 * g2 = 0
 */
const handSamples: LossSample[] = [
  { logp: -1, logpOld: -1, logpBehaviour: -1.5, logpRef: -1, advantage: 1, entropy: 0.5 },
  { logp: -2, logpOld: -2, logpBehaviour: -1, logpRef: -1, advantage: -0.5, entropy: 1.0 },
  { logp: -0.5, logpOld: -0.5 - Math.log(1.5), logpBehaviour: null, logpRef: -0.5, advantage: 2, entropy: 1.5 },
];
const noSelection: Partial<LossConfig> = { useEntropySelection: false };

test('hand-computed total, per-sample gradient coefficients and metrics', () => {
  const r = computeLoss(handSamples, noSelection);
  const w1 = Math.exp(-1);
  const expectedTotal = (-1 + w1 * 0.5 - 2.56 + 0.1 * (Math.E - 2)) / 3;
  assertClose(r.loss, expectedTotal);
  assertClose(r.loss, -1.1014107, 'hand', 1e-6);
  assertClose(r.gradLogp[0] as number, -1 / 3);
  assertClose(r.gradLogp[1] as number, (w1 * 0.5 + 0.1 * (1 - Math.E)) / 3);
  assertClose(r.gradLogp[1] as number, 0.0040372, 'hand', 1e-6);
  assert.equal(r.gradLogp[2], 0);
  assert.deepEqual([...r.gradEntropy], [0, 0, 0]);

  const m = r.metrics;
  assertClose(m.pgLoss, (-1 + w1 * 0.5 - 2.56) / 3);
  assertClose(m.kl, (Math.E - 2) / 3);
  assertClose(m.clipFraction, 1 / 3);
  assert.equal(m.dualClipFraction, 0);
  assertClose(m.ratioMean, (1 + 1 + 1.5) / 3);
  assertClose(m.isWeightMean, (2 + w1) / 3);
  assertClose(m.isWeightMin, w1);
  assertClose(m.isWeightTruncatedFraction, 1 / 3);
  assertClose(m.entropyMean, 1.0);
  assert.equal(m.selectedFraction, 1);
  assert.equal(m.numSelected, 3);
});

test('ablation switches: TIS off, KL off, clip off', () => {
  // TIS off: w1 = 1 → total = (−1 + 0.5 − 2.56 + 0.1·0.71828)/3
  const noTis = computeLoss(handSamples, { ...noSelection, useTis: false });
  assertClose(noTis.loss, (-1 + 0.5 - 2.56 + 0.1 * (Math.E - 2)) / 3);
  assertClose(noTis.gradLogp[1] as number, (0.5 + 0.1 * (1 - Math.E)) / 3);
  // IS statistics still describe the data
  assertClose(noTis.metrics.isWeightMin, Math.exp(-1));

  // KL off: no β term, and reference log-probs are not needed
  const noKl = computeLoss(
    handSamples.map(({ logpRef: _ref, ...s }) => s),
    { ...noSelection, useKl: false }
  );
  assertClose(noKl.loss, (-1 + Math.exp(-1) * 0.5 - 2.56) / 3);
  assertClose(noKl.gradLogp[1] as number, (Math.exp(-1) * 0.5) / 3);

  // clip off: s2 becomes −A·ρ = −3 with dL = −3
  const noClip = computeLoss(handSamples, { ...noSelection, useClip: false });
  assertClose(noClip.loss, (-1 + Math.exp(-1) * 0.5 - 3 + 0.1 * (Math.E - 2)) / 3);
  assertClose(noClip.gradLogp[2] as number, -3 / 3);
  assert.equal(noClip.metrics.clipFraction, 0);
});

test('KL is not weighted by the TIS weight', () => {
  // s1 alone with A = 0: total = β·KL regardless of w = 0.368
  const s: LossSample = { logp: -2, logpOld: -2, logpBehaviour: -1, logpRef: -1, advantage: 0, entropy: 1 };
  const r = computeLoss([s], noSelection);
  assertClose(r.loss, 0.1 * (Math.E - 2));
  assertClose(r.gradLogp[0] as number, 0.1 * (1 - Math.E));
});

test('entropy selection: the dropped step contributes nothing and the mean is over selected steps', () => {
  const samples: LossSample[] = [0.2, 0.9, 0.5, 0.1, 0.7].map((entropy, i) => ({
    logp: -1,
    logpOld: -1,
    logpRef: -1,
    advantage: i + 1, // A = 1..5, ρ = 1 → L_i = −A_i
    entropy,
  }));
  // k = floor(0.8 × 5) = 4: index 3 (entropy 0.1, A = 4) dropped
  // total = (−1 − 2 − 3 − 5)/4 = −2.75; g_i = −A_i/4 for selected
  const r = computeLoss(samples);
  assert.deepEqual([...r.selectionMask], [1, 1, 1, 0, 1]);
  assertClose(r.loss, -2.75);
  assert.deepEqual([...r.gradLogp], [-0.25, -0.5, -0.75, 0, -1.25]);
  assert.equal(r.metrics.selectedFraction, 0.8);
  assertClose(r.metrics.entropyMean, 2.4 / 5);
  assertClose(r.metrics.selectedEntropyMean, 2.3 / 4);

  // a precomputed batch-level mask and an explicit normaliser (gradient accumulation)
  const given = computeLoss(samples, {}, { selectionMask: [1, 0, 0, 0, 1], normalizer: 10 });
  assertClose(given.loss, (-1 - 5) / 10);
  assert.deepEqual([...given.gradLogp], [-0.1, 0, 0, 0, -0.5]);
});

test('entropy bonus: −c_H·H in the total, its own gradient coefficient', () => {
  // one sample, A = 0, no KL: total = −0.01·1.5; dTotal/dH = −0.01
  const r = computeLoss([{ logp: -1, logpOld: -1, advantage: 0, entropy: 1.5 }], {
    ...noSelection,
    useKl: false,
    entropyCoef: 0.01,
  });
  assertClose(r.loss, -0.015);
  assertClose(r.gradEntropy[0] as number, -0.01);
});

test('gradient coefficients match finite differences of the total (all terms on)', () => {
  const rng = createPrng(7);
  const samples: LossSample[] = Array.from({ length: 24 }, () => {
    const logpOld = -0.2 - 3 * rng.next();
    return {
      logp: logpOld + (rng.next() - 0.5) * 1.2, // ratios from e^−0.6 to e^0.6: some clipped, some not
      logpOld,
      logpBehaviour: rng.next() < 0.2 ? null : logpOld + (rng.next() - 0.5),
      logpRef: logpOld + (rng.next() - 0.5) * 2,
      advantage: (rng.next() - 0.5) * 4,
      entropy: rng.next() * 2,
    };
  });
  const config: Partial<LossConfig> = { entropyCoef: 0.05 };
  const base = computeLoss(samples, config);
  const mask = base.selectionMask;
  assert.ok(base.metrics.clipFraction > 0 && base.metrics.clipFraction < 1, 'exercise both branches');

  samples.forEach((s, i) => {
    const withLogp = (x: number) =>
      computeLoss(
        samples.map((t, j) => (j === i ? { ...t, logp: x } : t)),
        config,
        { selectionMask: mask }
      ).loss;
    assertDerivative(base.gradLogp[i] as number, withLogp, s.logp, `dTotal/dlogp[${i}]`);
    const withEntropy = (h: number) =>
      computeLoss(
        samples.map((t, j) => (j === i ? { ...t, entropy: h } : t)),
        config,
        { selectionMask: mask }
      ).loss;
    assertDerivative(base.gradEntropy[i] as number, withEntropy, s.entropy, `dTotal/dH[${i}]`);
  });
});

test('accepts the campaign TrainerSchema config object as is', () => {
  const trainer = TrainerSchema.parse({});
  const r = computeLoss(handSamples, { ...trainer, useEntropySelection: false });
  assertClose(r.loss, computeLoss(handSamples, noSelection).loss);
});

test('empty batches and empty selections give zero loss, no NaN', () => {
  const empty = computeLoss([]);
  assert.equal(empty.loss, 0);
  assert.equal(empty.gradLogp.length, 0);
  for (const value of Object.values(empty.metrics)) assert.ok(Number.isFinite(value));
  const none = computeLoss(handSamples, {}, { selectionMask: [0, 0, 0] });
  assert.equal(none.loss, 0);
  assert.deepEqual([...none.gradLogp], [0, 0, 0]);
});

test('non-finite inputs and inconsistent options are refused', () => {
  const bad = (patch: Partial<LossSample>) => [{ ...handSamples[0], ...patch } as LossSample];
  assert.throws(() => computeLoss(bad({ logp: NaN })), NonFiniteValueError);
  assert.throws(() => computeLoss(bad({ advantage: Infinity })), NonFiniteValueError);
  assert.throws(() => computeLoss(bad({ logpBehaviour: -Infinity })), NonFiniteValueError);
  assert.throws(() => computeLoss(bad({ entropy: NaN })), NonFiniteValueError);
  assert.throws(() => computeLoss(bad({ logpRef: null })), InvalidArgumentError); // useKl needs a reference
  assert.throws(() => computeLoss(handSamples, {}, { selectionMask: [1, 1] }), InvalidArgumentError);
  assert.throws(() => computeLoss(handSamples, {}, { selectionMask: [1, 2, 0] }), InvalidArgumentError);
  assert.throws(() => computeLoss(handSamples, {}, { normalizer: 0 }), InvalidArgumentError);
  assert.throws(() => computeLoss(handSamples, { klBeta: -1 }), InvalidArgumentError);
});
