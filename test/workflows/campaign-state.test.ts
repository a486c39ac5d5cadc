/** The campaign's pure scheduling and curation state (workflows/logic), without Temporal. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCampaignConfig } from '../../config/load';
import type { GroupSummary, TrajectorySummary } from '../../schemas/campaign';
import {
  episodesInFlight,
  groupPoolOptions,
  initialCampaignState,
  markGroupStarted,
  planNextGroup,
  pruneStaleBuffer,
  recordGroup,
  rolloutPlanFor,
  selectTrainBatch,
  takeFromBuffer,
  type TaskRef,
} from '../../workflows/logic/campaign-state';
import { applyLiveOverrides } from '../../workflows/logic/live-config';
import { loadCarriedState } from '../../workflows/logic/state-schema';

const task = (id: string): TaskRef => ({
  id,
  family: id,
  spec: { id },
  trainSeeds: { from: 0, to: 1000 },
  maxSteps: 4,
});

function state(overrides: Record<string, unknown> = {}) {
  const config = parseCampaignConfig({
    rollout: { envConcurrency: 16 },
    trainer: { minGroups: 2, maxGroups: 3 },
    ...overrides,
  });
  return initialCampaignState({
    campaignId: 'c',
    config,
    tasks: [task('a'), task('b')],
    heldOut: [],
    startedAtMs: 0,
    initialVersion: 0,
  });
}

function summary(groupId: string, taskId: string, rewards: Array<number | null>, version = 0): GroupSummary {
  const trajectories: TrajectorySummary[] = rewards.map((r, i) => ({
    trajectoryId: `${groupId}-e${i}`,
    manifestKey: `m/${groupId}-e${i}`,
    taskId,
    groupId,
    reward: r,
    status: r === null ? 'env_error' : 'ok',
    numSteps: 1,
    minPolicyVersion: version,
    maxPolicyVersion: version,
    injectedFromPool: false,
  }));
  return {
    groupId,
    taskId,
    seed: 1,
    requested: rewards.length,
    maxSteps: 4,
    trajectories,
    infraFailures: 0,
    startedAt: 0,
    endedAt: 1,
  };
}

test('rollout-wise scheduling fills env capacity with groups and stops at the limit', () => {
  const s = state();
  const started: string[] = [];
  for (let plan = planNextGroup(s); plan; plan = planNextGroup(s)) {
    markGroupStarted(s, plan, 0);
    started.push(plan.task.id);
  }
  // New tasks get n = nMax = 8, so 16 slots hold two groups, alternating tasks.
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(episodesInFlight(s), 16);
  // When one ends, the next starts at once (no batch barrier).
  assert.ok(recordGroup(s, summary('c-g000000', 'a', [1, 0, 0, 0, 0, 0, 0, 0]), 0));
  assert.equal(planNextGroup(s)?.task.id, 'a');
  assert.equal(recordGroup(s, summary('c-g000000', 'a', [1]), 0), false, 'a duplicate report is ignored');
});

test('dynamic rollout number and max steps follow the task history (DART §4.6, §4.7)', () => {
  const s = state();
  const plan = planNextGroup(s)!;
  markGroupStarted(s, plan, 0);
  assert.deepEqual(rolloutPlanFor(s, task('a')), { n: 8, maxSteps: 4 });
  // 8 of 8 successes in 2 steps: sr = 1 → n = 2; max steps = longest success = 1 step here.
  recordGroup(s, summary(plan.groupId, 'a', [1, 1, 1, 1, 1, 1, 1, 1]), 0);
  assert.deepEqual(rolloutPlanFor(s, task('a')), { n: 2, maxSteps: 1 });
  const off = state({ rollout: { dynamicRollout: false, dynamicMaxSteps: false, envConcurrency: 16 } });
  assert.deepEqual(rolloutPlanFor(off, task('a')), { n: 8, maxSteps: 4 });
});

/** Starts the next planned group and reports it at once with the given rewards; returns its task id. */
function runGroup(s: ReturnType<typeof state>, rewards: (taskId: string) => number[]): string {
  const plan = planNextGroup(s)!;
  markGroupStarted(s, plan, 0);
  recordGroup(s, summary(plan.groupId, plan.task.id, rewards(plan.task.id)), 0);
  return plan.task.id;
}

test('a solved task takes one round-robin turn in rollout.solvedTaskEvery; DART (every = 1) gives it every turn', () => {
  // Task a always succeeds, b fails: a is solved once its last 16 rewards (window) are all successes.
  const rewards = (id: string) => (id === 'a' ? [1, 1] : [1, 0, 0, 0, 0, 0, 0, 0]);
  const dart = state();
  const dartTurns = Array.from({ length: 24 }, () => runGroup(dart, rewards)).join('');
  assert.equal(dartTurns, 'ab'.repeat(12), 'DART: strict alternation, solved or not');
  assert.equal(dart.stats.a!.turnsPassed, undefined, 'nothing new in the carried state under DART’s rule');

  const s = state({ rollout: { envConcurrency: 16, solvedTaskEvery: 3 } });
  const turns = Array.from({ length: 28 }, () => runGroup(s, rewards)).join('');
  // a's 8 groups × 2 rewards = 16 straight successes (the window): from then on a takes part in one
  // round-robin round in 3 and b has the other rounds to itself.
  assert.equal(turns, 'ab'.repeat(8) + 'bbab'.repeat(3));
  assert.equal(s.stats.a!.turnsPassed, undefined, 'a just took its turn');
  runGroup(s, rewards);
  assert.equal(s.stats.a!.turnsPassed, 1);

  // One failure makes a unsolved again: it takes every turn from the next plan on.
  runGroup(s, (id) => (id === 'a' ? [1, 0] : [1, 0, 0, 0, 0, 0, 0, 0]));
  const after = Array.from({ length: 6 }, () => runGroup(s, (id) => (id === 'a' ? [1, 0] : [0, 1]))).join('');
  assert.match(after, /^(ab|ba){3}$/);
});

test('when every task is solved, the turn still goes to one of them (campaigns never stall)', () => {
  const s = state({ rollout: { envConcurrency: 16, solvedTaskEvery: 4 } });
  const turns = Array.from({ length: 40 }, () => runGroup(s, () => [1, 1])).join('');
  assert.equal(turns.length, 40);
  assert.ok(turns.slice(-12).includes('a') && turns.slice(-12).includes('b'), turns);
});

test("rollout.taskTurns 'signal': a task whose groups stop teaching gets few turns, and its share comes back when it fails", () => {
  const s = state({ rollout: { envConcurrency: 16, dynamicRollout: false, taskTurns: 'signal' } });
  // a: every group all successes (skipped by curation: nothing to teach); b: mixed rewards (trained).
  const allSuccess = [1, 1, 1, 1, 1, 1, 1, 1];
  const mixed = [1, 0, 1, 0, 1, 0, 1, 0];
  const warmUp = Array.from({ length: 24 }, () => runGroup(s, (id) => (id === 'a' ? allSuccess : mixed))).join('');
  assert.equal(warmUp.slice(0, 2), 'ab', 'untried tasks: equal weights, the round-robin order');
  assert.deepEqual(s.stats.b!.recentGroupsTaught?.slice(-3), [1, 1, 1]);
  assert.ok(s.stats.a!.recentGroupsTaught!.every((t) => t === 0));
  const turns = Array.from({ length: 80 }, () => runGroup(s, (id) => (id === 'a' ? allSuccess : mixed))).join('');
  const countA = turns.split('').filter((t) => t === 'a').length;
  // Weights ≈ 0.5/17 (a, ≥ 8 groups none taught) vs ≈ 16.5/17 (b): a takes ≈ 3 % of the turns, never none.
  assert.ok(countA >= 1 && countA <= 6, `a took ${countA} of 80 turns: ${turns}`);
  assert.equal(typeof s.stats.a!.turnCredit, 'number', 'the credits are carried state …');
  const carried = loadCarriedState(JSON.parse(JSON.stringify(s)));
  assert.equal(carried.stats.a!.turnCredit, s.stats.a!.turnCredit, '… and survive continue-as-new');
  assert.deepEqual(carried.stats.a!.recentGroupsTaught, s.stats.a!.recentGroupsTaught);
  assert.equal(s.stats.a!.turnsPassed, undefined);
  // a regresses (its groups now teach): its share climbs back to about half.
  const after = Array.from({ length: 60 }, () => runGroup(s, () => mixed)).join('');
  const shareAfter =
    after
      .slice(-20)
      .split('')
      .filter((t) => t === 'a').length / 20;
  assert.ok(shareAfter >= 0.4 && shareAfter <= 0.6, `after the regression: ${after}`);
  // Round robin (the default) records nothing new: older campaigns' carried state is unchanged.
  const rr = state({ rollout: { envConcurrency: 16, dynamicRollout: false } });
  Array.from({ length: 20 }, () => runGroup(rr, () => mixed));
  assert.equal(rr.stats.a!.turnCredit, undefined);
  assert.equal(rr.stats.a!.recentGroupsTaught, undefined);
});

test("rollout.taskTurns 'signal': a group too stale to train is no verdict on its task (neither taught nor not)", () => {
  const s = state({ rollout: { envConcurrency: 16, dynamicRollout: false, taskTurns: 'signal' } });
  const mixed = [1, 0, 1, 0];
  const startGroup = () => {
    const plan = planNextGroup(s)!;
    markGroupStarted(s, plan, 0);
    return plan;
  };
  // A group sampled by v0 reports after the head moved to v2 (maxStaleness 1): curation skips it as stale.
  const slow = startGroup();
  s.policyVersion = 2;
  recordGroup(s, summary(slow.groupId, slow.task.id, mixed, 0), 0);
  assert.equal(s.buffer.length, 1, 'the group is buffered (and later pruned) as before');
  assert.equal(s.stats[slow.task.id]!.recentGroupsTaught, undefined, 'the stale group is not counted as a 0');
  // The same task's fresh groups count: one that teaches (1), one with nothing to teach (0).
  const fresh = startGroup();
  recordGroup(s, summary(fresh.groupId, fresh.task.id, mixed, 2), 0);
  assert.deepEqual(s.stats[fresh.task.id]!.recentGroupsTaught, [1]);
  const saturated = startGroup();
  recordGroup(s, summary(saturated.groupId, saturated.task.id, [1, 1, 1, 1], 2), 0);
  assert.equal(s.stats[saturated.task.id]!.recentGroupsTaught!.at(-1), 0);
  const verdicts = Object.values(s.stats).flatMap((st) => st.recentGroupsTaught ?? []);
  assert.equal(verdicts.length, 2, 'two fresh groups, two verdicts; the stale one none');
});

test('curation.stepDiscount: successes of different lengths are trained on, the shorter rewarded more; γ = 1 is DART', () => {
  const stepsOf = (g: GroupSummary, steps: number[]): GroupSummary => ({
    ...g,
    trajectories: g.trajectories.map((t, i) => ({ ...t, numSteps: steps[i]! })),
  });
  const run = (stepDiscount: number) => {
    const s = state({ trainer: { minGroups: 1, maxGroups: 3 }, curation: { stepDiscount } });
    const ids: string[] = [];
    for (const steps of [
      [1, 1, 1, 2], // all successes, one took a step more (a free no-op first)
      [1, 1, 1, 1], // all successes in one step: nothing to learn
      [2, 2, 2, 2], // all successes in two steps: equal rewards, nothing to learn
    ]) {
      const plan = planNextGroup(s)!;
      markGroupStarted(s, plan, 0);
      recordGroup(s, stepsOf(summary(plan.groupId, plan.task.id, [1, 1, 1, 1]), steps), 0);
      ids.push(plan.groupId);
    }
    return { batch: selectTrainBatch(s), ids };
  };
  const discounted = run(0.9);
  assert.deepEqual(
    discounted.batch!.groups.map((g) => g.groupId),
    [discounted.ids[0]]
  );
  assert.deepEqual(
    discounted.batch!.groups[0]!.trajectories.map((t) => t.reward),
    [1, 1, 1, 0.9],
    'GRPO sees the discounted rewards'
  );
  assert.deepEqual(
    discounted.batch!.skipped.map((x) => x.reason),
    ['mean-out-of-range', 'no-signal']
  );
  assert.equal(run(1).batch, null, 'DART: every group is all successes, none is trained');
  // Only positive rewards shrink: a failure after stalling (MiniWoB's −1, or 0) is not made milder.
  const s = state({ trainer: { minGroups: 1, maxGroups: 3 }, curation: { stepDiscount: 0.9 } });
  const plan = planNextGroup(s)!;
  markGroupStarted(s, plan, 0);
  recordGroup(s, stepsOf(summary(plan.groupId, plan.task.id, [1, 1, -1, 0]), [1, 2, 3, 4]), 0);
  assert.deepEqual(
    selectTrainBatch(s)!.groups[0]!.trajectories.map((t) => t.reward),
    [1, 0.9, -1, 0]
  );
});

test('train batches: eligible groups only, each trajectory taken once, stale data dropped', () => {
  const s = state();
  for (let i = 0; i < 4; i++)
    markGroupStarted(
      s,
      planNextGroup(s) ?? {
        groupId: `c-g00000${i}`,
        task: task('a'),
        seed: 1,
        n: 2,
        maxSteps: 4,
        poolWanted: 0,
        passedOver: [],
      },
      0
    );
  recordGroup(s, summary('c-g000000', 'a', [1, 0, 0, 1]), 0);
  recordGroup(s, summary('c-g000001', 'b', [1, 1, 1, 1]), 0); // all success: zero advantage, skipped
  assert.equal(selectTrainBatch(s), null, 'one eligible group < minGroups 2');
  recordGroup(s, summary('c-g000002', 'a', [0, 0, null, 1]), 0); // the infra failure is not a reward
  const batch = selectTrainBatch(s)!;
  assert.deepEqual(
    batch.groups.map((g) => g.groupId),
    ['c-g000000', 'c-g000002']
  );
  assert.equal(batch.groups[1]!.trajectories.length, 3);
  takeFromBuffer(s, batch);
  assert.equal(s.buffer.length, 0);
  assert.equal(selectTrainBatch(s), null, 'nothing is trained twice');
  // A later version makes old data stale: maxStaleness 1 keeps v ≥ policyVersion − 1.
  recordGroup(s, summary('c-g000003', 'a', [1, 0], 0), 0);
  s.policyVersion = 2;
  assert.equal(pruneStaleBuffer(s), 1);
});

test('setConfig accepts live fields with valid values and names the problem otherwise', () => {
  const s = state();
  const next = applyLiveOverrides(s.config, { 'trainer.learningRate': 0.001, 'rollout.envConcurrency': 8 });
  assert.equal(next.trainer.learningRate, 0.001);
  assert.equal(next.rollout.envConcurrency, 8);
  assert.throws(() => applyLiveOverrides(s.config, { 'policy.width': 2 }), /cannot be changed on a running campaign/);
  // The pool's key decides how entries are named and trimmed: switching it mid-campaign would strand entries.
  assert.throws(
    () => applyLiveOverrides(s.config, { 'curation.poolKey': 'instruction' }),
    /cannot be changed on a running campaign/
  );
  assert.throws(
    () => applyLiveOverrides(s.config, { 'trainer.learningRate': -1 }),
    /setConfig trainer\.learningRate: Too small/
  );
  assert.throws(() => applyLiveOverrides(s.config, {}), /at least one/);
});

test("groups get the pool keyed by instruction only when curation.poolKey says so (DART's per-task inputs otherwise)", () => {
  assert.deepEqual(groupPoolOptions(parseCampaignConfig({ campaign: { id: 'p', suite: 'quickstart' } })), {});
  assert.deepEqual(
    groupPoolOptions(
      parseCampaignConfig({ campaign: { id: 'p', suite: 'quickstart' }, curation: { poolKey: 'instruction' } })
    ),
    { poolByInstruction: { maxPerTask: 64 } }
  );
  assert.deepEqual(
    groupPoolOptions(
      parseCampaignConfig({
        campaign: { id: 'p', suite: 'quickstart' },
        curation: { poolKey: 'instruction', poolMaxPerTask: 16 },
      })
    ),
    { poolByInstruction: { maxPerTask: 16 } }
  );
  assert.throws(
    () => parseCampaignConfig({ campaign: { id: 'p', suite: 'quickstart' }, curation: { poolKey: 'colour' } }),
    /curation\.poolKey/
  );
});
