/**
 * The trainer's in-memory GRPO update (activities/trainer/grpo-update.ts) on the real ONNX train session:
 * the RL learning rate, the target-KL early stop and the entropy bonus act on the weights as configured.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAdamState, createPrng } from '../../algorithms';
import { grpoUpdate, weightDistance, type GrpoSample } from '../../activities/trainer/grpo-update';
import { createTrainSession, type PolicyTrainSession } from '../../policy/session';
import { clickQueryPolicySpec as spec, IMAGE_CHANNELS, numActions, prevWidth } from '../../policy/spec';
import { cloneWeights, initWeights } from '../../policy/weights';
import { TrainerSchema } from '../../schemas/config';
import { randomBatch } from './helpers';

const N = 24;
const A = numActions(spec);

/** N step samples in 4 groups of 3 one-step trajectories × 2 steps, rewards alternating within a group. */
function samples(rewardOf: (trajectory: number) => number): GrpoSample[] {
  const b = randomBatch(spec, N, 5);
  const so = IMAGE_CHANNELS * spec.imageSize * spec.imageSize;
  const P = prevWidth(spec);
  return Array.from({ length: N }, (_, i) => {
    const trajectory = Math.floor(i / 2);
    return {
      obs: b.obs.slice(i * so, (i + 1) * so),
      text: b.text.slice(i * spec.vocabSize, (i + 1) * spec.vocabSize),
      mask: b.mask.slice(i * A, (i + 1) * A),
      prev: b.prev!.slice(i * P, (i + 1) * P),
      groupId: `g${Math.floor(trajectory / 3)}`,
      trajectoryId: `t${trajectory}`,
      reward: rewardOf(trajectory),
      action: (i * 37) % 256, // click cells: always valid
      behaviourLogProb: null,
    };
  });
}

async function run(session: PolicyTrainSession, overrides: Record<string, unknown>, rewardOf = (t: number) => t % 2) {
  const weights = cloneWeights(initWeights(spec, 3));
  const before = cloneWeights(weights);
  const trainer = TrainerSchema.parse({ klBeta: 0, epochs: 2, minibatchSize: 8, ...overrides });
  const r = await grpoUpdate({
    session,
    spec,
    weights,
    optimizer: createAdamState(weights),
    samples: samples(rewardOf),
    trainer,
    rng: createPrng(7),
  });
  return { ...r, weights, before };
}

test('grpoUpdate: 2 epochs × 3 minibatches of 8 without a target KL; the RL rate sets the step size', async () => {
  const session = await createTrainSession(spec);
  const base = await run(session, { learningRate: 1e-2 });
  assert.equal(base.metrics.optimizerSteps, 6);
  assert.equal(base.metrics.stoppedEarly, 0);
  assert.ok(base.metrics.updateNorm! > 0);
  assert.equal(base.metrics.updateNorm, weightDistance(base.weights, base.before));
  // rlLearningRate replaces learningRate for RL steps: Adam's first steps move each weight by about the rate.
  const slow = await run(session, { learningRate: 1e-2, rlLearningRate: 1e-4 });
  const ratio = base.metrics.updateNorm! / slow.metrics.updateNorm!;
  assert.ok(ratio > 30 && ratio < 300, `update norm ratio ${ratio}`);
  await session.release();
});

test('grpoUpdate: targetKl stops the remaining minibatches once the policy moved that far from π_old', async () => {
  const session = await createTrainSession(spec);
  const stopped = await run(session, { learningRate: 5e-2, targetKl: 1e-9 });
  // The first update always runs; the next minibatch sees KL > 1e-9 and the step ends.
  assert.equal(stopped.metrics.optimizerSteps, 1);
  assert.equal(stopped.metrics.stoppedEarly, 1);
  assert.ok(stopped.metrics.approxKl! > 1e-9);
  const loose = await run(session, { learningRate: 5e-2, targetKl: 1e3 });
  assert.equal(loose.metrics.optimizerSteps, 6);
  assert.equal(loose.metrics.stoppedEarly, 0);
  await session.release();
});

test('grpoUpdate: with no advantage anywhere, the entropy bonus alone raises the policy entropy', async () => {
  const session = await createTrainSession(spec);
  const flat = () => 1; // every group all-success: zero advantages, no PPO gradient
  const noBonus = await run(session, { learningRate: 1e-2, entropyCoef: 0 }, flat);
  assert.equal(noBonus.metrics.updateNorm, 0);
  const bonus = await run(session, { learningRate: 1e-2, entropyCoef: 0.1, useEntropySelection: false }, flat);
  assert.ok(bonus.metrics.updateNorm! > 0);
  const rows = samples(flat);
  const { packBatch } = await import('../../policy/session');
  const mean = (x: Float32Array) => x.reduce((a, b) => a + b, 0) / x.length;
  const hBefore = mean((await session.forward(bonus.before, packBatch(spec, rows))).entropy);
  const hAfter = mean((await session.forward(bonus.weights, packBatch(spec, rows))).entropy);
  assert.ok(hAfter > hBefore, `entropy ${hBefore} → ${hAfter}`);
  await session.release();
});
