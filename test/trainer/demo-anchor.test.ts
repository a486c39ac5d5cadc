/**
 * The demonstration anchor of RL steps (trainer.demoAnchorCoef; activities/trainer/demo-anchor.ts) against
 * real MinIO and onnxruntime: the demos are found through the reference's ledger entry, the anchored step
 * keeps the demonstrated action more probable than the same step without it, and a campaign without a
 * cloning start is refused with the fix named.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { anchorSubset, cloningDemos, drawAnchorRows } from '../../activities/trainer/demo-anchor';
import { ensureInitialCheckpoint, loadCheckpoint } from '../../activities/trainer/checkpoints';
import { loadTrainSamples } from '../../activities/trainer/samples';
import { runBehaviourClone, runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainGroupRef, TrainStepInput } from '../../activities/trainer/types';
import { parseCampaignConfig } from '../../config/load';
import { createInferenceSession, createTrainSession, packBatch } from '../../policy/session';
import { cloneWeights, type PolicyWeights } from '../../policy/weights';
import { grpoUpdate } from '../../activities/trainer/grpo-update';
import { createAdamState, createPrng } from '../../algorithms';
import { numActions } from '../../policy/spec';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';
import { writeSyntheticGroups } from './fixtures';

const spec = specForWidth(1);
let store: ObjectStore;
let cleanup: () => Promise<void>;

before(async () => {
  ({ store, cleanup } = await freshBucket('demo-anchor'));
});
after(async () => {
  await cleanup();
});

const ref = (groupId: string, ids: string[]): TrainGroupRef => ({
  groupId,
  taskId: 't',
  trajectories: ids.map((trajectoryId) => ({
    trajectoryId,
    manifestKey: `m/${trajectoryId}`,
    reward: 1,
    injectedFromPool: false,
  })),
});

describe('demonstration anchor: pure parts', () => {
  it('keeps a deterministic subset of at most max trajectories, whatever order the ledger lists them in', () => {
    const groups = [ref('a', ['a0', 'a1', 'a2', 'a3']), ref('b', ['b0', 'b1', 'b2', 'b3'])];
    const subset = anchorSubset(groups, 5, 'salt');
    assert.equal(subset.length, 5);
    assert.ok(subset.every((g) => g.trajectories.length === 1));
    const ids = (gs: TrainGroupRef[]) => gs.map((g) => g.trajectories[0]!.trajectoryId);
    assert.deepEqual(ids(anchorSubset([...groups].reverse(), 5, 'salt')), ids(subset));
    // Each kept trajectory keeps its own group id; another salt draws another subset of the same size.
    assert.ok(subset.every((g) => g.groupId === g.trajectories[0]!.trajectoryId[0]));
    assert.equal(anchorSubset(groups, 100, 'salt').length, 8);
    assert.notDeepEqual(ids(anchorSubset(groups, 5, 'other')), ids(subset));
  });

  it('draws distinct rows, or all of them when there are fewer than asked', () => {
    let i = 0;
    const seq = [3, 3, 1, 3, 0];
    const drawn = drawAnchorRows(10, 3, () => seq[i++]!);
    assert.deepEqual(drawn, [3, 1, 0]);
    assert.deepEqual(
      drawAnchorRows(2, 3, () => 0),
      [0, 1]
    );
  });
});

function stepInput(
  campaignId: string,
  fromVersion: number,
  referenceVersion: number,
  groups: TrainGroupRef[],
  trainer: Record<string, unknown>
): TrainStepInput {
  return {
    campaignId,
    trainStep: fromVersion + 1,
    fromVersion,
    groups,
    trainer: parseCampaignConfig({
      policy: { bcWarmStartEpisodes: 8 },
      trainer: { learningRate: 3e-3, klBeta: 0, epochs: 2, ...trainer },
    }).trainer,
    maxStaleness: 4,
    referenceVersion,
    policy: { seed: 0, width: 1 },
  };
}

/** Mean −log π(a_demo|s) of the demos under `weights`. */
async function demoNll(weights: PolicyWeights, demos: TrainGroupRef[]): Promise<number> {
  const { samples } = await loadTrainSamples(store, spec, demos, { usePolicyIndex: false });
  const session = await createInferenceSession(spec, weights);
  try {
    const out = await session.run(packBatch(spec, samples));
    const A = numActions(spec);
    return -samples.reduce((a, s, i) => a + out.logp[i * A + s.action]!, 0) / samples.length;
  } finally {
    await session.release();
  }
}

/** v0 → behaviour cloning on 4 demo groups (v1); returns the demos and RL groups sampled from v1. */
async function clonedCampaign(campaignId: string) {
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  // The demos' recorded action is "click the centre" (the fixture's step.action): cloning learns that cell.
  const demos = (
    await writeSyntheticGroups(store, spec, v0.weights, {
      campaignId,
      groups: 4,
      perGroup: 4,
      policyVersion: 0,
      seed: 11,
    })
  ).groups;
  await runBehaviourClone(
    { store },
    { campaignId, trainStep: 1, fromVersion: 0, demos, epochs: 20, learningRate: 3e-3, policy: { seed: 0, width: 1 } }
  );
  const v1 = await loadCheckpoint(store, campaignId, 1, spec);
  const rl = (
    await writeSyntheticGroups(store, spec, v1.weights, {
      campaignId,
      groups: 6,
      perGroup: 8,
      policyVersion: 1,
      seed: 5,
    })
  ).groups;
  return { campaignId, demos, rl };
}

describe('demonstration anchor in trainStep (real MinIO and onnxruntime)', () => {
  it('finds the demos through the reference checkpoint and reports the anchor in the step metrics', async () => {
    const c = await clonedCampaign(`anchor-on-${Date.now()}`);
    const found = await cloningDemos(store, c.campaignId, 1);
    const ids = (gs: TrainGroupRef[]) => gs.flatMap((g) => g.trajectories.map((t) => t.trajectoryId)).sort();
    assert.deepEqual(ids(found), ids(c.demos));
    const on = await runTrainStep(
      { store },
      stepInput(c.campaignId, 1, 1, c.rl, { rlLearningRate: 1e-2, demoAnchorCoef: 2, demoAnchorSamples: 8 })
    );
    assert.ok(Number.isFinite(on.metrics.anchorNll), `anchorNll reported: ${JSON.stringify(on.metrics)}`);
    assert.equal(on.metrics.anchorRows, 16, 'every demo step of the 16 demos is an anchor row');
    assert.equal(on.metrics.anchorSkippedGroups, 0);
    const plain = await runTrainStep({ store }, stepInput(c.campaignId, 2, 1, c.rl, {}));
    assert.equal(plain.metrics.anchorNll, undefined);
  });

  it('paired on one start, batch and seed: coef 0 changes nothing; coef 2 keeps the demonstrated action', async () => {
    const c = await clonedCampaign(`anchor-pair-${Date.now()}`);
    const start = await loadCheckpoint(store, c.campaignId, 1, spec);
    const { samples } = await loadTrainSamples(store, spec, c.rl);
    const anchor = (await loadTrainSamples(store, spec, c.demos, { usePolicyIndex: false })).samples;
    const session = await createTrainSession(spec, { threads: 1 });
    const update = async (demoAnchorCoef: number, withAnchor: boolean) => {
      const weights = cloneWeights(start.weights);
      const trainer = stepInput(c.campaignId, 1, 1, c.rl, { rlLearningRate: 1e-2, demoAnchorCoef: 1 }).trainer;
      await grpoUpdate({
        session,
        spec,
        weights,
        optimizer: createAdamState(weights),
        samples,
        trainer: { ...trainer, demoAnchorCoef, demoAnchorSamples: 8 },
        ...(withAnchor ? { anchor } : {}),
        rng: createPrng('pair'),
      });
      return weights;
    };
    const none = await update(0, false);
    const zero = await update(0, true);
    const anchored = await update(2, true);
    for (const name of Object.keys(none)) assert.deepEqual(zero[name], none[name], `${name}: coef 0 is plain RL`);
    const before = await demoNll(start.weights, c.demos);
    const nllPlain = await demoNll(none, c.demos);
    const nllAnchored = await demoNll(anchored, c.demos);
    assert.ok(nllPlain > before, `the RL update moved off the demos: ${before} → ${nllPlain}`);
    assert.ok(nllAnchored < nllPlain, `anchored ${nllAnchored} < plain ${nllPlain} (cloned: ${before})`);
  });

  it('refuses the anchor when the reference is not a behaviour-cloned checkpoint, naming the fix', async () => {
    const campaignId = `anchor-none-${Date.now()}`;
    await ensureInitialCheckpoint(store, campaignId, spec, 0);
    const v0 = await loadCheckpoint(store, campaignId, 0, spec);
    const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
      campaignId,
      groups: 4,
      perGroup: 8,
      policyVersion: 0,
      seed: 3,
    });
    await assert.rejects(
      runTrainStep({ store }, stepInput(campaignId, 0, 0, groups, { demoAnchorCoef: 1 })),
      (err: unknown) =>
        err instanceof ApplicationFailure &&
        err.type === 'InvalidTrainInput' &&
        err.nonRetryable &&
        /v0 of campaign .* is the initial model .*: set policy\.bcWarmStartEpisodes > 0 or trainer\.demoAnchorCoef: 0/.test(
          err.message
        )
    );
    // v1 trained by RL is no cloning start either.
    await runTrainStep({ store }, stepInput(campaignId, 0, 0, groups, {}));
    await assert.rejects(
      runTrainStep({ store }, stepInput(campaignId, 1, 1, groups, { demoAnchorCoef: 1 })),
      (err: unknown) =>
        err instanceof ApplicationFailure &&
        err.type === 'InvalidTrainInput' &&
        err.nonRetryable &&
        /v1 of campaign .* was trained by RL step 1/.test(err.message)
    );
  });

  it('is refused by the config without a cloning start, and for the VLM trainer', () => {
    assert.throws(
      () => parseCampaignConfig({ trainer: { demoAnchorCoef: 0.5 } }),
      /trainer\.demoAnchorCoef.*set policy\.bcWarmStartEpisodes > 0 or trainer\.demoAnchorCoef: 0/s
    );
    assert.throws(
      () =>
        parseCampaignConfig({
          policy: { kind: 'vlm', bcWarmStartEpisodes: 8 },
          trainer: { demoAnchorCoef: 0.5, targetKl: null, epochs: 1 },
        }),
      /trainer\.demoAnchorCoef.*applies only to the embedded trainer/s
    );
  });
});
