import { test } from 'node:test';
import assert from 'node:assert/strict';
import { groupAdvantages, stepAdvantages, type StepRewardSample } from '../../algorithms/advantages';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import { assertClose } from './finite-difference';

const EPS = 1e-6;

test('trajectory statistics: rewards [1, 0, 0, 1] (one step each)', () => {
  // mean = 2/4 = 0.5; Bessel var = 4·(0.5)²/3 = 1/3; std = 0.5773503
  // A = ±0.5 / (0.5773503 + 1e-6) = ±0.8660239
  const { advantages, stats } = groupAdvantages(
    [1, 0, 0, 1].map((reward) => ({ reward, numSteps: 1 })),
    { statisticsOver: 'trajectories' }
  );
  const a = 0.5 / (Math.sqrt(1 / 3) + EPS);
  assertClose(a, 0.8660239, 'hand value', 1e-6);
  assert.deepEqual(advantages, [a, -a, -a, a]);
  assertClose(stats.mean, 0.5);
  assertClose(stats.std, Math.sqrt(1 / 3));
  assert.equal(stats.count, 4);
});

test('step statistics (DART default) weigh long trajectories more', () => {
  // success with 1 step, failure with 3 steps → step samples [1, 0, 0, 0]
  // mean = 1/4 = 0.25; Bessel var = (0.75² + 3·0.25²)/3 = (0.5625 + 0.1875)/3 = 0.25; std = 0.5
  // A(success) = 0.75 / 0.500001 = 1.499997; A(failure) = −0.25 / 0.500001 = −0.499999
  const trajs = [
    { reward: 1, numSteps: 1 },
    { reward: 0, numSteps: 3 },
  ];
  const steps = groupAdvantages(trajs);
  assert.equal(steps.stats.count, 4);
  assertClose(steps.stats.std, 0.5);
  assertClose(steps.advantages[0] as number, 0.75 / (0.5 + EPS));
  assertClose(steps.advantages[1] as number, -0.25 / (0.5 + EPS));
  assertClose(steps.advantages[0] as number, 1.499997, 'hand', 1e-6);

  // The same group over trajectories: [1, 0] → mean 0.5, var = (0.25 + 0.25)/1 = 0.5, std = 0.7071068
  // A = ±0.5 / 0.7071078 = ±0.7071058
  const trajectories = groupAdvantages(trajs, { statisticsOver: 'trajectories' });
  assertClose(trajectories.advantages[0] as number, 0.5 / (Math.SQRT1_2 + EPS));
  assertClose(trajectories.advantages[1] as number, -0.5 / (Math.SQRT1_2 + EPS));
});

test('stepAdvantages groups by groupId, broadcasts to every step, keeps input order', () => {
  const samples: StepRewardSample[] = [
    { groupId: 'g1', trajectoryId: 'a', reward: 1 },
    { groupId: 'g2', trajectoryId: 'x', reward: 0 },
    { groupId: 'g1', trajectoryId: 'b', reward: 0 },
    { groupId: 'g1', trajectoryId: 'b', reward: 0 },
    { groupId: 'g1', trajectoryId: 'b', reward: 0 },
    { groupId: 'g2', trajectoryId: 'y', reward: 1 },
  ];
  const { advantages, groups } = stepAdvantages(samples);
  // g1 is the [1, 0, 0, 0] group above; g2 = steps [0, 1]: mean 0.5, std √0.5, A = ∓0.7071058
  const g1pos = 0.75 / (0.5 + EPS);
  const g1neg = -0.25 / (0.5 + EPS);
  const g2 = 0.5 / (Math.SQRT1_2 + EPS);
  const expected = [g1pos, -g2, g1neg, g1neg, g1neg, g2];
  expected.forEach((e, i) => assertClose(advantages[i] as number, e, `sample ${i}`));
  assert.equal(groups.get('g1')?.count, 4);
  assert.equal(groups.get('g2')?.count, 2);
});

test('all-equal rewards give exactly zero advantage', () => {
  for (const reward of [0, 1, 0.7, -0.3]) {
    const { advantages } = groupAdvantages([1, 2, 3].map((numSteps) => ({ reward, numSteps })));
    assert.deepEqual(advantages, [0, 0, 0], `reward ${reward}`);
  }
  // 0.7 + 0.7 + 0.7 = 2.0999999999999996: without the explicit check round-off would leak through.
  const t = groupAdvantages(
    [0.7, 0.7, 0.7].map((reward) => ({ reward, numSteps: 1 })),
    { statisticsOver: 'trajectories' }
  );
  assert.deepEqual(t.advantages, [0, 0, 0]);
});

test('one-element groups get mean 0 and std 1 (verl), so A = R / (1 + ε)', () => {
  const one = groupAdvantages([{ reward: 1, numSteps: 1 }]);
  assert.deepEqual(one.stats, { count: 1, mean: 0, std: 1 });
  assertClose(one.advantages[0] as number, 1 / (1 + EPS));
  // one episode, five steps, trajectory statistics: still a one-element population
  const traj = groupAdvantages([{ reward: 1, numSteps: 5 }], { statisticsOver: 'trajectories' });
  assertClose(traj.advantages[0] as number, 1 / (1 + EPS));
  // one episode, three steps, step statistics: three equal samples → zero
  assert.deepEqual(groupAdvantages([{ reward: 1, numSteps: 3 }]).advantages, [0]);
  // a one-episode failure carries nothing: 0 / (1 + ε) = 0
  assert.deepEqual(groupAdvantages([{ reward: 0, numSteps: 1 }]).advantages, [0]);
});

test('Dr.GRPO variant and population std', () => {
  // normalizeByStd false: A = R − mean = ±0.5 for [1, 0]
  const dr = groupAdvantages(
    [
      { reward: 1, numSteps: 1 },
      { reward: 0, numSteps: 1 },
    ],
    { normalizeByStd: false }
  );
  assert.deepEqual(dr.advantages, [0.5, -0.5]);
  // population std of [1, 0] = 0.5 → A = 0.5 / 0.500001
  const pop = groupAdvantages(
    [
      { reward: 1, numSteps: 1 },
      { reward: 0, numSteps: 1 },
    ],
    { unbiasedStd: false }
  );
  assertClose(pop.advantages[0] as number, 0.5 / (0.5 + EPS));
});

test('empty input and zero-step trajectories', () => {
  assert.deepEqual(groupAdvantages([]).advantages, []);
  assert.equal(stepAdvantages([]).advantages.length, 0);
  assert.deepEqual(groupAdvantages([{ reward: 1, numSteps: 0 }]).advantages, [0]);
});

test('NaN and infinite rewards are refused with a typed error', () => {
  for (const bad of [NaN, Infinity, -Infinity]) {
    assert.throws(
      () =>
        groupAdvantages([
          { reward: 0, numSteps: 1 },
          { reward: bad, numSteps: 1 },
        ]),
      (e: unknown) => e instanceof NonFiniteValueError && e.field === 'reward' && e.index === 1
    );
    assert.throws(() => stepAdvantages([{ groupId: 'g', trajectoryId: 't', reward: bad }]), NonFiniteValueError);
  }
});

test('inconsistent step rewards and bad counts are refused', () => {
  assert.throws(
    () =>
      stepAdvantages([
        { groupId: 'g', trajectoryId: 't', reward: 1 },
        { groupId: 'g', trajectoryId: 't', reward: 0 },
      ]),
    InvalidArgumentError
  );
  assert.throws(() => groupAdvantages([{ reward: 1, numSteps: -1 }]), InvalidArgumentError);
  assert.throws(() => groupAdvantages([{ reward: 1, numSteps: 1.5 }]), InvalidArgumentError);
});
