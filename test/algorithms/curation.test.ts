import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, NonFiniteValueError } from '../../algorithms/common';
import {
  curateGroup,
  downsampleGroup,
  dynamicMaxSteps,
  dynamicRolloutNumber,
  freshStepMask,
  groupEligibility,
  groupTeachRate,
  injectPooledSuccess,
  isHardTask,
  isSolvedTask,
  recentSuccessRate,
  stepDiscountFactor,
  stepIsFresh,
  takesTurn,
  trajectoryFreshness,
  weightedTurn,
  type CandidateTrajectory,
} from '../../algorithms/curation';
import { createPrng } from '../../algorithms/prng';

test('dynamic rollout number: the §4.6 mapping table', () => {
  // ⌊9/sr − 7⌋: 0.6 → 15 − 7 = 8; 0.7 → 12.857 − 7 = 5.857 → 5; 0.75 → 12 − 7 = 5;
  // 0.8 → 11.25 − 7 = 4.25 → 4; 0.9 → 10 − 7 = 3; 1.0 → 9 − 7 = 2
  const table: [number, number][] = [
    [0.6, 8],
    [0.7, 5],
    [0.75, 5],
    [0.8, 4],
    [0.9, 3],
    [1.0, 2],
  ];
  for (const [sr, n] of table) assert.equal(dynamicRolloutNumber(sr), n, `sr ${sr}`);
});

test('dynamic rollout number is robust to how sr was computed in floating point', () => {
  assert.equal(dynamicRolloutNumber(9 / 10), 3);
  assert.equal(dynamicRolloutNumber(0.9000000000000001), 3); // 9/sr − 7 = 2.9999999999999982 without the guard
  assert.equal(dynamicRolloutNumber(0.3 + 0.6), 3); // 0.8999999999999999
  assert.equal(dynamicRolloutNumber(6 / 10), 8);
  assert.equal(dynamicRolloutNumber(3 / 4), 5);
  assert.equal(dynamicRolloutNumber(4 / 5), 4);
  assert.equal(dynamicRolloutNumber(7 / 10), 5);
});

test('dynamic rollout number below θ, unknown, disabled, custom bounds', () => {
  for (const sr of [0, 0.3, 0.59, 0.5999999]) assert.equal(dynamicRolloutNumber(sr), 8, `sr ${sr}`);
  assert.equal(dynamicRolloutNumber(null), 8); // no history yet
  assert.equal(dynamicRolloutNumber(1, { enabled: false }), 8);
  assert.equal(dynamicRolloutNumber(1, { nMin: 3 }), 3); // max(3, 2)
  assert.equal(dynamicRolloutNumber(0.5, { successRateThreshold: 0.4 }), 8); // 18 − 7 = 11, capped at nMax
  assert.equal(dynamicRolloutNumber(1.5), 1); // 6 − 7 = −1 → nMin (non-binary rewards)
  assert.throws(() => dynamicRolloutNumber(NaN), NonFiniteValueError);
  assert.throws(() => dynamicRolloutNumber(-0.1), InvalidArgumentError);
  assert.throws(() => dynamicRolloutNumber(1, { nMin: 9 }), InvalidArgumentError);
});

test('recent success rate: window first, then invalid rows (null, < 0) leave numerator and count', () => {
  const newestFirst = [1, null, -1, 0, 1, 1];
  // window 4 → [1, null, −1, 0] → valid [1, 0] → 0.5
  assert.equal(recentSuccessRate(newestFirst, 4), 0.5);
  // window 6 → valid [1, 0, 1, 1] → 0.75
  assert.equal(recentSuccessRate(newestFirst, 6), 0.75);
  assert.equal(recentSuccessRate([null, -1], 2), null);
  assert.equal(recentSuccessRate([], 8), null);
  assert.throws(() => recentSuccessRate([1, NaN], 2), NonFiniteValueError);
  // end to end: 9 successes in the last 10 → 3 rollouts
  assert.equal(dynamicRolloutNumber(recentSuccessRate([1, 1, 1, 0, 1, 1, 1, 1, 1, 1], 10)), 3);
});

test('dynamic max steps: longest success (+ margin) within [minSteps, maxSteps], else the global 30', () => {
  const history = [
    { reward: 1, numSteps: 7 },
    { reward: 0, numSteps: 30 },
    { reward: 1, numSteps: 12 },
    { reward: null, numSteps: 25 },
  ];
  assert.equal(dynamicMaxSteps(history), 12);
  assert.equal(dynamicMaxSteps(history, { margin: 2 }), 14);
  assert.equal(dynamicMaxSteps(history, { margin: 25 }), 30); // capped
  assert.equal(dynamicMaxSteps([{ reward: 1, numSteps: 2 }], { minSteps: 5 }), 5);
  assert.equal(dynamicMaxSteps([{ reward: 0, numSteps: 9 }]), 30); // no success yet
  assert.equal(dynamicMaxSteps([]), 30);
  assert.equal(dynamicMaxSteps(history, { enabled: false }), 30);
  assert.equal(dynamicMaxSteps(history, { maxSteps: 10 }), 10);
  assert.throws(() => dynamicMaxSteps([{ reward: Infinity, numSteps: 3 }]), NonFiniteValueError);
  assert.throws(() => dynamicMaxSteps(history, { minSteps: 40 }), InvalidArgumentError);
});

test('hard-task flag: every valid recent rollout failed', () => {
  assert.equal(isHardTask([0, 0, 0]), true);
  assert.equal(isHardTask([0, null, -1]), true);
  assert.equal(isHardTask([0, 1, 0]), false);
  assert.equal(isHardTask([]), false); // no evidence
  assert.equal(isHardTask([null, -1]), false);
  assert.equal(isHardTask([0, 0], { minRollouts: 4 }), false);
  assert.equal(isHardTask([0, 0, 0, 1], { maxSuccessRate: 0.25 }), true);
});

test('staleness bound per step: v − maxStaleness ≤ version ≤ v', () => {
  // training version 5 with maxStaleness 1 (DART's top-2 window): versions 4 and 5
  assert.equal(stepIsFresh(5, 5, 1), true);
  assert.equal(stepIsFresh(4, 5, 1), true);
  assert.equal(stepIsFresh(3, 5, 1), false);
  assert.equal(stepIsFresh(6, 5, 1), false); // from the future: refused
  assert.equal(stepIsFresh(4, 5, 0), false); // strictly on-policy
  assert.deepEqual([...freshStepMask([3, 4, 5, 6], 5, 1)], [0, 1, 1, 0]);
  assert.equal(trajectoryFreshness({ minPolicyVersion: 4, maxPolicyVersion: 5 }, 5, 1), 'fresh');
  assert.equal(trajectoryFreshness({ minPolicyVersion: 3, maxPolicyVersion: 5 }, 5, 1), 'partial');
  assert.equal(trajectoryFreshness({ minPolicyVersion: 1, maxPolicyVersion: 3 }, 5, 1), 'stale');
  assert.equal(trajectoryFreshness({ minPolicyVersion: 0, maxPolicyVersion: 9 }, 5, 1), 'partial');
  assert.throws(() => stepIsFresh(4, 5, -1), InvalidArgumentError);
});

test('group eligibility: count ≥ 8 and 0 ≤ mean < 1 over valid rewards', () => {
  assert.deepEqual(groupEligibility([1, 0, 1, 0, 1, 0, 1, 0]), { eligible: true, reason: 'ok', count: 8, mean: 0.5 });
  assert.equal(groupEligibility([1, 0, 1, 0, 1, 0, 1]).reason, 'too-few');
  assert.equal(groupEligibility([1, 0, 1, 0, 1, 0, 1, null, -1]).reason, 'too-few'); // 7 valid
  assert.equal(groupEligibility(Array(8).fill(1)).reason, 'mean-out-of-range'); // all success: A = 0
  assert.equal(groupEligibility(Array(8).fill(0)).eligible, true); // all failed: eligible, then pool injection
  assert.equal(groupEligibility([1, 0], { perTaskLimit: 2 }).eligible, true);
  assert.throws(() => groupEligibility([1, NaN]), NonFiniteValueError);
});

const traj = (id: string, reward: number | null, createdAt: number): CandidateTrajectory => ({
  trajectoryId: id,
  reward,
  createdAt,
});

test('experience-pool injection replaces the oldest failure with the most recent pooled success', () => {
  const group = [traj('f1', 0, 30), traj('f2', 0, 10), traj('f3', 0, 20)];
  const pool = [traj('old-success', 1, 5), traj('new-success', 1, 50), traj('newer-failure', 0, 60)];
  const r = injectPooledSuccess(group, pool);
  assert.equal(r.kind, 'injected');
  if (r.kind !== 'injected') return;
  assert.deepEqual(
    r.group.map((t) => t.trajectoryId),
    ['f1', 'new-success', 'f3']
  );
  assert.equal(r.replaced.trajectoryId, 'f2');
  assert.equal(injectPooledSuccess(group, []).kind, 'no-pooled-success');
  assert.equal(injectPooledSuccess([traj('s', 1, 1), traj('f', 0, 2)], pool).kind, 'unchanged');
});

test('down-sampling to 8 keeps ≥ 1 success and ≥ 1 failure, input order, and is seed-deterministic', () => {
  const oneSuccess = Array.from({ length: 12 }, (_, i) => traj(`t${i}`, i === 7 ? 1 : 0, i));
  const oneFailure = Array.from({ length: 12 }, (_, i) => traj(`t${i}`, i === 3 ? 0 : 1, i));
  for (let seed = 0; seed < 200; seed++) {
    for (const group of [oneSuccess, oneFailure]) {
      const out = downsampleGroup(group, 8, createPrng(seed));
      assert.equal(out.length, 8);
      assert.ok(out.some((t) => (t.reward as number) > 0) && out.some((t) => t.reward === 0), `seed ${seed}`);
      const positions = out.map((t) => group.indexOf(t));
      assert.deepEqual(
        positions,
        [...positions].sort((a, b) => a - b)
      );
      assert.equal(new Set(positions).size, 8);
    }
  }
  const a = downsampleGroup(oneSuccess, 8, createPrng('g-1')).map((t) => t.trajectoryId);
  const b = downsampleGroup(oneSuccess, 8, createPrng('g-1')).map((t) => t.trajectoryId);
  assert.deepEqual(a, b);
  assert.equal(downsampleGroup(oneSuccess.slice(0, 5), 8, createPrng(1)).length, 5); // small groups unchanged
});

test('curateGroup: the §3.4 b–d pipeline', () => {
  const rng = createPrng(42);
  const allFailed = Array.from({ length: 10 }, (_, i) => traj(`f${i}`, 0, 100 + i));
  const pool = [traj('pooled', 1, 50)];
  const r = curateGroup(allFailed, pool, rng);
  assert.equal(r.kind, 'train');
  if (r.kind === 'train') {
    assert.equal(r.trajectories.length, 8);
    assert.equal(r.injected?.trajectoryId, 'pooled');
    assert.ok(r.trajectories.some((t) => t.trajectoryId === 'pooled'));
    assert.ok(!r.trajectories.some((t) => t.trajectoryId === 'f0')); // the oldest was replaced
  }
  assert.deepEqual(curateGroup(allFailed, [], rng), { kind: 'skip', reason: 'no-signal', count: 10, mean: 0 });
  assert.equal(curateGroup(allFailed, pool, rng, { experiencePool: false }).kind, 'skip');
  const allSuccess = Array.from({ length: 8 }, (_, i) => traj(`s${i}`, 1, i));
  assert.deepEqual(curateGroup(allSuccess, [], rng), { kind: 'skip', reason: 'mean-out-of-range', count: 8, mean: 1 });
  const mixed = [...allFailed.slice(0, 6), traj('s', 1, 1), traj('bad', null, 2), traj('s2', 1, 3)];
  const m = curateGroup(mixed, pool, rng);
  assert.equal(m.kind, 'train');
  if (m.kind === 'train') {
    assert.equal(m.injected, null);
    assert.ok(!m.trajectories.some((t) => t.trajectoryId === 'bad')); // invalid rows never train
    assert.equal(m.trajectories.length, 8);
  }
  assert.equal(curateGroup(mixed.slice(0, 3), pool, rng).kind, 'skip');
});

test('isSolvedTask: the last `window` valid rewards all successes; infra failures are not evidence', () => {
  assert.equal(isSolvedTask([1, 1, 1], 3), true);
  assert.equal(isSolvedTask([1, 1], 3), false, 'too few rewards');
  assert.equal(isSolvedTask([0, 1, 1, 1], 3), true, 'an old failure outside the window');
  assert.equal(isSolvedTask([1, 1, 0, 1], 3), false);
  assert.equal(isSolvedTask([1, null, 1, -1, 1], 3), true, 'null / −1 rows are skipped, not failures');
  assert.equal(isSolvedTask([1, 1, 0.5], 3), false, 'a partial score is not a success');
  assert.throws(() => isSolvedTask([1], 0), /window must be an integer ≥ 1/);
});

test('takesTurn: an unsolved task always; a solved one on every k-th turn; k = 1 is DART', () => {
  assert.equal(takesTurn(false, 0, 4), true);
  assert.deepEqual(
    [0, 1, 2, 3].map((passed) => takesTurn(true, passed, 4)),
    [false, false, false, true]
  );
  assert.equal(takesTurn(true, 0, 1), true);
  assert.throws(() => takesTurn(true, 0, 0), /every must be an integer ≥ 1/);
});

test('groupTeachRate: Jeffreys estimate of the share of recent groups that passed curation', () => {
  assert.equal(groupTeachRate([]), 0.5, 'untried: a full share');
  assert.equal(groupTeachRate(Array<number>(16).fill(0)), 0.5 / 17, 'none taught: ≈ 0.03, never 0');
  assert.equal(groupTeachRate(Array<number>(16).fill(1)), 16.5 / 17);
  assert.equal(groupTeachRate([...Array<number>(15).fill(0), 1]), 1.5 / 17, 'one taught group triples it');
  assert.ok(groupTeachRate([1, 0, 1, 0]) > groupTeachRate([0, 0, 1, 0]));
  assert.throws(() => groupTeachRate([1, 2]), /taught\[1\] must be 0 or 1, got 2/);
});

test('weightedTurn: smooth weighted round robin — shares follow the weights, picks stay interleaved', () => {
  const picks = (weights: number[], count: number): number[] => {
    let credits = weights.map(() => 0);
    return Array.from({ length: count }, () => {
      const turn = weightedTurn(credits, weights);
      credits = turn.credits;
      assert.ok(Math.abs(credits.reduce((a, b) => a + b, 0)) < 1e-9, 'credits sum to 0');
      return turn.pick;
    });
  };
  assert.deepEqual(picks([1, 1], 4), [0, 1, 0, 1], 'equal weights: round robin');
  assert.deepEqual(picks([3, 1], 8), [0, 0, 1, 0, 0, 0, 1, 0], '3 : 1, the light one spread out');
  assert.deepEqual(picks([0.2, 0.8], 10).filter((x) => x === 0).length, 2);
  assert.deepEqual(picks([0, 1], 3), [1, 1, 1], 'a zero weight never wins against a positive one');
  const input = [0, 0];
  weightedTurn(input, [1, 2]);
  assert.deepEqual(input, [0, 0], 'the caller’s credits are not changed');
  assert.throws(() => weightedTurn([0], [1, 1]), /same, non-zero length/);
  assert.throws(() => weightedTurn([0], [-1]), /weight 0 must be ≥ 0/);
});

test('stepDiscountFactor: γ^(steps − 1), exact for the first steps', () => {
  assert.equal(stepDiscountFactor(0.9, 1), 1);
  assert.equal(stepDiscountFactor(0.9, 0), 1, 'an empty trajectory is not rewarded more');
  assert.equal(stepDiscountFactor(0.9, 2), 0.9);
  assert.ok(Math.abs(stepDiscountFactor(0.9, 4) - 0.729) < 1e-12);
  assert.equal(stepDiscountFactor(1, 30), 1);
  assert.throws(() => stepDiscountFactor(0, 2), /gamma must be in \(0, 1\]/);
  assert.throws(() => stepDiscountFactor(1.5, 2), /gamma must be in \(0, 1\]/);
  assert.throws(() => stepDiscountFactor(0.9, 1.5), /numSteps must be an integer ≥ 0/);
});

test('curateGroup skipEqualRewards: equal positive rewards teach nothing; off (DART) they pass when below accMax', () => {
  const rng = createPrng(1);
  const equal = [0.9, 0.9, 0.9, 0.9].map((reward, i) => ({ trajectoryId: `t${i}`, reward, createdAt: i }));
  assert.deepEqual(
    (({ kind, reason }) => ({ kind, reason }))(
      curateGroup(equal, [], rng, { perTaskLimit: 2, skipEqualRewards: true }) as { kind: string; reason: string }
    ),
    { kind: 'skip', reason: 'no-signal' }
  );
  assert.equal(curateGroup(equal, [], rng, { perTaskLimit: 2 }).kind, 'train', 'the default keeps DART’s rule');
  const differ = equal.map((t, i) => ({ ...t, reward: i === 0 ? 1 : 0.9 }));
  assert.equal(curateGroup(differ, [], rng, { perTaskLimit: 2, skipEqualRewards: true }).kind, 'train');
});
