/**
 * The issue-14 trainer options against real MinIO and onnxruntime: an explicit policy spec in TrainerDeps
 * (no swapping of the process default), fresh vs carried Adam moments, per-trajectory advantage statistics.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ensureInitialCheckpoint, loadCheckpoint } from '../../activities/trainer/checkpoints';
import { runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainStepInput } from '../../activities/trainer/types';
import { parseCampaignConfig } from '../../config/load';
import {
  defaultPolicySpec,
  huePolicySpec,
  legacyPolicySpec,
  maxContextPolicySpec,
  specForPolicy,
  specKey,
  wordQueryPolicySpec,
} from '../../policy/spec';
import { trainerPolicyOf } from '../../workflows/logic/campaign-state';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';
import { writeSyntheticGroups } from './fixtures';

let store: ObjectStore;
let cleanup: () => Promise<void>;

before(async () => {
  ({ store, cleanup } = await freshBucket('trainer-options'));
});
after(async () => {
  await cleanup();
});

function input(
  campaignId: string,
  trainStep: number,
  fromVersion: number,
  groups: TrainStepInput['groups'],
  trainer: Record<string, unknown> = {}
): TrainStepInput {
  return {
    campaignId,
    trainStep,
    fromVersion,
    groups,
    trainer: parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0, ...trainer } }).trainer,
    maxStaleness: 2,
    referenceVersion: 0,
    policy: { seed: 0, width: 1 },
  };
}

async function twoSteps(campaignId: string, trainer: Record<string, unknown>) {
  const spec = specForWidth(1);
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const a = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 4,
    perGroup: 8,
    policyVersion: 0,
    seed: 3,
  });
  const first = await runTrainStep({ store }, input(campaignId, 1, 0, a.groups, trainer));
  const v1 = await loadCheckpoint(store, campaignId, 1, spec);
  const b = await writeSyntheticGroups(store, spec, v1.weights, {
    campaignId,
    groups: 4,
    perGroup: 8,
    policyVersion: 1,
    seed: 4,
  });
  const second = await runTrainStep({ store }, input(campaignId, 2, 1, b.groups, trainer));
  return { first, second, v1, v2: await loadCheckpoint(store, campaignId, 2, spec) };
}

test('optimizerReset: rl-start starts Adam fresh at the reference only, every-step at each step, none never', async () => {
  const none = await twoSteps('opt-none', { optimizerReset: 'none' });
  const rlStart = await twoSteps('opt-rl-start', { optimizerReset: 'rl-start' });
  const every = await twoSteps('opt-every', { optimizerReset: 'every-step' });
  // The first step starts from the reference v0: fresh for rl-start and every-step, v0's own state for none.
  assert.equal(none.first.metrics.freshOptimizer, 0);
  assert.equal(rlStart.first.metrics.freshOptimizer, 1);
  assert.equal(every.first.metrics.freshOptimizer, 1);
  assert.equal(none.second.metrics.freshOptimizer, 0);
  assert.equal(rlStart.second.metrics.freshOptimizer, 0, 'v1 is not the reference: moments carried');
  assert.equal(every.second.metrics.freshOptimizer, 1);
  // Carried: Adam's step count goes on; fresh every step: it restarts.
  const steps = (r: Awaited<ReturnType<typeof twoSteps>>): [number, number] => [
    r.v1.optimizer!.step,
    r.v2.optimizer!.step,
  ];
  const [n1, n2] = steps(none);
  assert.ok(n2 > n1, `carried moments keep counting (${n1} → ${n2})`);
  const [e1, e2] = steps(every);
  assert.equal(e2, e1, 'fresh moments every step: same count per step');
});

test('advantageStatistics is passed to the advantages: the config parses both and the step trains with each', async () => {
  for (const advantageStatistics of ['steps', 'trajectories'] as const) {
    const campaignId = `adv-${advantageStatistics}`;
    const r = await twoSteps(campaignId, { advantageStatistics });
    assert.equal(r.second.version, 2);
  }
  assert.throws(() => parseCampaignConfig({ trainer: { advantageStatistics: 'tokens' } }));
});

test('TrainerDeps.spec: a train step on a non-default architecture needs no change to the process default', async () => {
  const campaignId = 'explicit-spec';
  const spec = legacyPolicySpec;
  const before = specKey(defaultPolicySpec);
  assert.notEqual(specKey(spec), before);
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 4,
    perGroup: 8,
    policyVersion: 0,
    seed: 5,
  });
  const r = await runTrainStep({ store, spec }, input(campaignId, 1, 0, groups));
  assert.equal(r.version, 1);
  await loadCheckpoint(store, campaignId, 1, spec); // checked against the spec it was trained with
  assert.equal(specKey(defaultPolicySpec), before, 'the process default is untouched');
  // Without the explicit spec, the default architecture refuses this campaign's checkpoint.
  await assert.rejects(runTrainStep({ store }, input(campaignId, 2, 1, groups)));
});

type Weights = Record<string, Float32Array>;

/** A zero-initialised tensor of the option's own: 0 in v0, moved by the step. */
const zeroInitMoved = (tensor: string) => (v0: Weights, v1: Weights) => {
  assert.ok(v0[tensor]!.every((v) => v === 0));
  assert.ok(
    v1[tensor]!.some((v) => v !== 0),
    `${tensor} got a gradient and moved`
  );
};

/** conv0.weight is [16,7,4,4] with hueInput: its input channels 3–6 are the hue channels. */
const hueSlice = (w: Float32Array) => Array.from(w).filter((_, i) => Math.floor(i / 16) % 7 >= 3);

const architectureOptions = [
  { option: 'clickMaxContext', trains: 'ctx.max', spec: maxContextPolicySpec, moved: zeroInitMoved('ctx.max') },
  {
    option: 'clickWordQuery',
    trains: 'wquery.weight',
    spec: wordQueryPolicySpec,
    moved: zeroInitMoved('wquery.weight'),
  },
  {
    option: 'hueInput',
    trains: 'conv0 on the hue channels',
    spec: huePolicySpec,
    moved: (v0: Weights, v1: Weights) => {
      const before = hueSlice(v0['conv0.weight']!);
      assert.equal(before.length, 16 * 4 * 16);
      assert.ok(
        hueSlice(v1['conv0.weight']!).some((v, i) => v !== before[i]),
        'the hue weights got a gradient and moved'
      );
    },
  },
] as const;

for (const { option, trains, spec: expected, moved } of architectureOptions) {
  test(`policy.${option} reaches the trainer through its input: the step trains ${trains} of that network`, async () => {
    const campaignId = `option-${option}`;
    const config = parseCampaignConfig({ policy: { [option]: true } });
    const policy = trainerPolicyOf(config);
    assert.deepEqual(policy, { seed: 0, width: 1, [option]: true });
    // Other campaigns' trainer inputs are unchanged (no new field).
    assert.deepEqual(trainerPolicyOf(parseCampaignConfig({})), { seed: 0, width: 1 });
    const spec = specForPolicy(config.policy);
    assert.equal(specKey(spec), specKey(expected));
    await ensureInitialCheckpoint(store, campaignId, spec, 0);
    const v0 = await loadCheckpoint(store, campaignId, 0, spec);
    const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
      campaignId,
      groups: 8,
      perGroup: 8,
      policyVersion: 0,
      seed: 3,
    });
    // No TrainerDeps.spec: the input's policy settings select the network.
    const r = await runTrainStep({ store }, { ...input(campaignId, 1, 0, groups), policy });
    assert.equal(r.version, 1);
    assert.ok((r.metrics.gradNorm ?? 0) > 0, 'the synthetic groups carry a learning signal');
    moved(v0.weights, (await loadCheckpoint(store, campaignId, 1, spec)).weights);
    // Without the setting, the default network refuses this campaign's checkpoint.
    await assert.rejects(runTrainStep({ store }, input(campaignId, 2, 1, groups)));
  });
}
