/**
 * The campaign's control plane as a pure state machine (workflows/logic/campaign-loop.ts, lineage.ts,
 * state-schema.ts): each defect of issue 12 that a long campaign would hit has a case here.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCampaignConfig } from '../../config/load';
import type { GroupSummary } from '../../schemas/campaign';
import { tick, type CampaignAction } from '../../workflows/logic/campaign-loop';
import {
  adoptTrainedVersion,
  applyRolloutOutcome,
  bufferCapacity,
  campaignStatus,
  episodesInFlight,
  initialCampaignState,
  recordGroup,
  recordEval,
  recordGroupLost,
  rolloutPlanFor,
  selectTrainBatch,
  setEndpoints,
  trimBuffer,
  type CampaignState,
  type TaskRef,
} from '../../workflows/logic/campaign-state';
import { ancestry, distanceAlong, isFreshFor, pruneLineage, rollbackTarget } from '../../workflows/logic/lineage';
import {
  CampaignStateError,
  loadCarriedState,
  migrateV1,
  stateBytes,
  validateCampaignState,
} from '../../workflows/logic/state-schema';

const task = (id: string, maxSteps = 10): TaskRef => ({
  id,
  family: id,
  spec: { id },
  trainSeeds: { from: 0, to: 1000 },
  maxSteps,
});

const servers = [
  { serverId: 's1', url: 'http://127.0.0.1:1/' },
  { serverId: 's2', url: 'http://127.0.0.1:2/' },
];

function state(overrides: Record<string, unknown> = {}): CampaignState {
  const config = parseCampaignConfig({
    rollout: { envConcurrency: 16 },
    trainer: { minGroups: 1, maxGroups: 2 },
    ...overrides,
  });
  const s = initialCampaignState({
    campaignId: 'c',
    config,
    tasks: [task('a'), task('b')],
    heldOut: [task('a')],
    startedAtMs: 0,
    initialVersion: 0,
  });
  s.phase = 'running';
  setEndpoints(s, servers);
  s.servedVersions = { s1: 0, s2: 0 };
  return s;
}

function summary(groupId: string, taskId: string, rewards: number[], version = 0): GroupSummary {
  return {
    groupId,
    taskId,
    seed: 1,
    requested: rewards.length,
    maxSteps: 4,
    trajectories: rewards.map((r, i) => ({
      trajectoryId: `${groupId}-e${i}`,
      manifestKey: `campaigns/c/trajectories/${groupId}-e${i}/manifest.json`,
      taskId,
      groupId,
      reward: r,
      status: 'ok',
      numSteps: 2,
      minPolicyVersion: version,
      maxPolicyVersion: version,
      injectedFromPool: false,
    })),
    infraFailures: 0,
    startedAt: 0,
    endedAt: 1,
  };
}

const kinds = (actions: CampaignAction[]) => actions.map((a) => a.kind);
const groupsOf = (actions: CampaignAction[]) =>
  actions.flatMap((a) => (a.kind === 'startGroups' ? a.plans.map((p) => p.groupId) : []));

test('lineage: staleness is the distance along parents; abandoned branches are never fresh', () => {
  // 0 → 1 → 2 → 3 (3 refused by a gate) ; 2 → 4 (trained on after the rollback)
  const lineage = { '0': -1, '1': 0, '2': 1, '3': 2, '4': 2 };
  assert.deepEqual(ancestry(lineage, 4, 10), [4, 2, 1, 0]);
  assert.equal(distanceAlong(lineage, 4, 2, 1), 1, 'the parent is 1 version stale although 4 − 2 = 2');
  assert.equal(distanceAlong(lineage, 4, 3, 10), null, 'v3 is not an ancestor of v4');
  assert.equal(isFreshFor(lineage, 4, { minPolicyVersion: 2, maxPolicyVersion: 2 }, 1), true);
  assert.equal(isFreshFor(lineage, 4, { minPolicyVersion: 3, maxPolicyVersion: 3 }, 1), false, 'abandoned branch');
  assert.equal(isFreshFor(lineage, 4, { minPolicyVersion: 2, maxPolicyVersion: 3 }, 5), false, 'any step from v3');
  assert.equal(isFreshFor(lineage, 2, { minPolicyVersion: 4, maxPolicyVersion: 4 }, 5), false, 'newer than the head');
  assert.equal(isFreshFor(lineage, 4, { minPolicyVersion: 1, maxPolicyVersion: 1 }, 1), false, 'too stale');
  assert.equal(rollbackTarget(lineage, 3, [2, 0]), 2);
  assert.equal(rollbackTarget(lineage, 3, [0]), 0, 'nearest served ancestor');
  assert.deepEqual(pruneLineage(lineage, [4], 1), { '4': 2, '2': 1, '1': 0 });
});

test('staleness after a pin: data of the abandoned newer line is not trained into the pinned line', () => {
  const s = state({ curation: { maxStaleness: 1 } });
  // v0 → v1 → v2 trained; the operator pins v1 (rollback); v3 is then trained from v1.
  adoptTrainedVersion(s, { version: 1, fromVersion: 0 });
  adoptTrainedVersion(s, { version: 2, fromVersion: 1 });
  s.policyVersion = 1; // what pinCheckpoint does
  adoptTrainedVersion(s, { version: 3, fromVersion: 1 });
  assert.equal(s.policyVersion, 3);
  s.inFlight = {
    g1: { groupId: 'g1', taskId: 'a', n: 2, startedAtMs: 0, run: 0 },
    g2: { groupId: 'g2', taskId: 'a', n: 2, startedAtMs: 0, run: 0 },
  };
  recordGroup(s, summary('g1', 'a', [1, 0], 2), 0); // sampled by the abandoned v2
  recordGroup(s, summary('g2', 'a', [1, 0], 1), 0); // sampled by v1, the parent of v3
  const batch = selectTrainBatch(s)!;
  assert.deepEqual(
    batch.groups.map((g) => g.groupId),
    ['g2'],
    'v1 data is one version stale (not 2); v2 data is never trained'
  );
  assert.deepEqual(batch.allowedVersions, [3, 1]);
});

test('a version trained from a head that moved meanwhile is abandoned, never adopted', () => {
  const s = state();
  adoptTrainedVersion(s, { version: 1, fromVersion: 0 });
  // v2 trains from v1 while a gate refuses v1 → the head goes back to v0
  s.rollout = { workflowId: 'r1', startedAtMs: 0, run: 0, version: 1 };
  assert.equal(applyRolloutOutcome(s, { version: 1, ok: false, servedVersions: { s1: 0, s2: 0 } }), 'rolled-back');
  assert.equal(s.policyVersion, 0);
  assert.equal(adoptTrainedVersion(s, { version: 2, fromVersion: 1 }), 'abandoned');
  assert.equal(s.policyVersion, 0);
  assert.equal(s.pendingRollout, null, 'the refused branch is never rolled out');
});

test('a policy server that died is dropped; a later rollback never returns to its old version', () => {
  const s = state();
  s.servedVersions = { s1: 0, s2: 5 };
  adoptTrainedVersion(s, { version: 5, fromVersion: 0 });
  adoptTrainedVersion(s, { version: 6, fromVersion: 5 });
  s.rollout = { workflowId: 'r6', startedAtMs: 0, run: 0, version: 6 };
  s.pendingRollout = null;
  // s1 never picked its reload up (dead); s2 took v6.
  assert.equal(
    applyRolloutOutcome(s, { version: 6, ok: true, servedVersions: { s1: 0, s2: 6 }, droppedServers: ['s1'] }),
    'ok'
  );
  assert.deepEqual(
    s.endpoints.map((e) => e.serverId),
    ['s2']
  );
  assert.deepEqual(s.servedVersions, { s2: 6 }, "the dead server's old v0 is forgotten");
  adoptTrainedVersion(s, { version: 7, fromVersion: 6 });
  s.rollout = { workflowId: 'r7', startedAtMs: 0, run: 0, version: 7 };
  applyRolloutOutcome(s, { version: 7, ok: false, servedVersions: { s2: 6 } });
  assert.equal(s.policyVersion, 6, 'rolled back to what the live server serves, not min(served) = v0');
  // a registry refresh without s2 forgets it too
  setEndpoints(s, []);
  assert.deepEqual(s.servedVersions, {});
});

test('a task group that fails frees its env capacity and new groups start', () => {
  const s = state({ rollout: { envConcurrency: 16, nMax: 8 } });
  const first = tick(s, { nowMs: 0, continueAsNewDue: false });
  assert.deepEqual(groupsOf(first), ['c-g000000', 'c-g000001']);
  assert.equal(episodesInFlight(s), 16);
  assert.deepEqual(groupsOf(tick(s, { nowMs: 1, continueAsNewDue: false })), [], 'capacity full');
  // The child of g000000 is terminated: it never signals. Settled as lost, its slots are free again.
  assert.equal(recordGroupLost(s, 'c-g000000')?.n, 8);
  assert.equal(s.infraFailures, 8);
  assert.deepEqual(groupsOf(tick(s, { nowMs: 2, continueAsNewDue: false })), ['c-g000002']);
  assert.equal(recordGroupLost(s, 'c-g000000'), null, 'settling twice is a no-op');
});

test('train steps overlap rollouts (also with a canary gate) and never block continue-as-new', () => {
  const s = state({ eval: { gateEveryVersions: 1 } });
  tick(s, { nowMs: 0, continueAsNewDue: false });
  recordGroup(s, summary('c-g000000', 'a', [1, 0, 0, 0, 0, 0, 0, 0]), 0);
  s.rollout = { workflowId: 'r', startedAtMs: 0, run: 0, version: 0 }; // a gated rollout in flight
  const actions = tick(s, { nowMs: 1, continueAsNewDue: false });
  assert.ok(kinds(actions).includes('startTrainStep'), 'the trainer does not wait for model sync');
  assert.ok(s.train);
  // continue-as-new is due while the step and the rollout run: it happens now, their refs travel in the state
  recordGroup(s, summary('c-g000001', 'b', [1, 0, 0, 0, 0, 0, 0, 0]), 0);
  const can = tick(s, { nowMs: 2, continueAsNewDue: true });
  assert.equal(can.at(-1)?.kind, 'continueAsNew');
  assert.ok(!kinds(can).includes('startTrainStep'));
  const next = loadCarriedState(JSON.parse(JSON.stringify(s)));
  assert.equal(next.train?.workflowId, s.train.workflowId);
  assert.equal(next.rollout?.workflowId, 'r');
});

test('a pending rollout survives continue-as-new and is rolled out by the next run', () => {
  const s = state();
  s.rollout = { workflowId: 'r1', startedAtMs: 0, run: 0, version: 1 };
  adoptTrainedVersion(s, { version: 1, fromVersion: 0 });
  adoptTrainedVersion(s, { version: 2, fromVersion: 1 });
  assert.equal(s.pendingRollout, 2);
  const next = loadCarriedState(JSON.parse(JSON.stringify(s)));
  next.runIndex++;
  assert.equal(next.pendingRollout, 2);
  applyRolloutOutcome(next, { version: 1, ok: true, servedVersions: { s1: 1, s2: 1 } });
  const actions = tick(next, { nowMs: 0, continueAsNewDue: false });
  const rollout = actions.find((a) => a.kind === 'startRollout');
  assert.equal(rollout?.kind === 'startRollout' ? rollout.version : null, 2);
});

test('evaluations start once a new version is served everywhere, every eval.everyVersions rollouts', () => {
  const s = state({ eval: { everyVersions: 2 } });
  assert.deepEqual(
    tick(s, { nowMs: 0, continueAsNewDue: false })
      .filter((a) => a.kind === 'startEval')
      .map((a) => (a.kind === 'startEval' ? a.version : -1)),
    [0],
    'the first point: v0'
  );
  s.evaluation = null;
  for (const v of [1, 2]) {
    adoptTrainedVersion(s, { version: v, fromVersion: v - 1 });
    const r = tick(s, { nowMs: v, continueAsNewDue: false }).find((a) => a.kind === 'startRollout');
    assert.ok(r);
    applyRolloutOutcome(s, { version: v, ok: true, servedVersions: { s1: v, s2: v } });
  }
  const ev = tick(s, { nowMs: 3, continueAsNewDue: false }).find((a) => a.kind === 'startEval');
  assert.equal(ev?.kind === 'startEval' ? ev.version : null, 2);
});

test('an evaluation that meets the target is confirmed on the next served version, not everyVersions later', () => {
  const target = { targetSuccess: 0.9, targetConsecutiveEvals: 2, targetMinEpisodesPerFamily: 4 };
  const point = (version: number, rate: number) => ({
    version,
    successRate: rate,
    episodes: 8,
    atEpisodes: 0,
    atMs: 0,
    perFamily: { a: rate },
    episodesPerFamily: { a: 8 },
  });
  const evalsAfterOneVersion = (rateAtV0: number, confirmTargetEarly: boolean): number[] => {
    const s = state({ campaign: target, eval: { everyVersions: 5 } });
    tick(s, { nowMs: 0, continueAsNewDue: false, confirmTargetEarly });
    assert.equal(s.evaluation?.version, 0);
    s.evaluation = null;
    recordEval(s, point(0, rateAtV0));
    adoptTrainedVersion(s, { version: 1, fromVersion: 0 });
    assert.ok(
      tick(s, { nowMs: 1, continueAsNewDue: false, confirmTargetEarly }).some((a) => a.kind === 'startRollout')
    );
    applyRolloutOutcome(s, { version: 1, ok: true, servedVersions: { s1: 1, s2: 1 } });
    return tick(s, { nowMs: 2, continueAsNewDue: false, confirmTargetEarly }).flatMap((a) =>
      a.kind === 'startEval' ? [a.version] : []
    );
  };
  assert.deepEqual(evalsAfterOneVersion(0.95, true), [1], 'v0 met the target: v1 is evaluated at once');
  assert.deepEqual(evalsAfterOneVersion(0.5, true), [], 'v0 below the target: the usual cadence (every 5)');
  assert.deepEqual(evalsAfterOneVersion(0.95, false), [], 'runs recorded before the patch keep the cadence');
  // The confirming evaluation measures a newer version, never the same one twice.
  const s = state({ campaign: target, eval: { everyVersions: 5 } });
  tick(s, { nowMs: 0, continueAsNewDue: false, confirmTargetEarly: true });
  s.evaluation = null;
  recordEval(s, point(0, 1));
  assert.ok(!kinds(tick(s, { nowMs: 1, continueAsNewDue: false, confirmTargetEarly: true })).includes('startEval'));
  assert.equal(s.phase, 'running', 'one point meeting the target does not stop a campaign that needs two');
  recordEval(s, point(1, 0.95));
  tick(s, { nowMs: 2, continueAsNewDue: false, confirmTargetEarly: true });
  assert.equal(s.phase, 'draining', 'two in a row do');
});

/** Trains version v from v − 1 and serves it on both servers (one tick). */
function serveNextVersion(s: ReturnType<typeof state>, v: number): void {
  adoptTrainedVersion(s, { version: v, fromVersion: v - 1 });
  assert.ok(tick(s, { nowMs: v, continueAsNewDue: false }).some((a) => a.kind === 'startRollout'));
  applyRolloutOutcome(s, { version: v, ok: true, servedVersions: { s1: v, s2: v } });
}

test("eval.sparseEveryVersions: far from the target (a family's training success below the threshold) evaluations come sparser", () => {
  // Versions at which evaluations start, serving one new version per tick, with task a's recent
  // training rewards set before each tick.
  const evalVersions = (evalConfig: Record<string, unknown>, rewardsAt: (v: number) => number[]): number[] => {
    const s = state({ eval: evalConfig });
    const seen: number[] = [];
    for (let v = 0; v <= 12; v++) {
      if (v > 0) serveNextVersion(s, v);
      s.stats.a!.recentRewards = rewardsAt(v);
      for (const a of tick(s, { nowMs: v, continueAsNewDue: false })) if (a.kind === 'startEval') seen.push(a.version);
      s.evaluation = null;
    }
    return seen;
  };
  const low = () => [1, 0, 0, 0];
  const high = () => [1, 1, 1, 0];
  const sparse = { everyVersions: 2, sparseEveryVersions: 6, sparseBelowRolloutSuccess: 0.7 };
  assert.deepEqual(evalVersions({ everyVersions: 2 }, low), [0, 2, 4, 6, 8, 10, 12], 'off (default): every 2');
  assert.deepEqual(evalVersions(sparse, low), [0, 6, 12], 'training success 25 % < 70 %: every 6');
  assert.deepEqual(evalVersions(sparse, high), [0, 2, 4, 6, 8, 10, 12], 'training success 75 %: every 2');
  assert.deepEqual(
    evalVersions(sparse, (v) => (v < 9 ? low() : high())),
    [0, 6, 9, 11],
    'once the family is near the target, an evaluation is due at once (3 versions since the last ≥ 2)'
  );
  assert.deepEqual(
    evalVersions(sparse, () => []),
    [0, 6, 12],
    'a family with no rollout episodes yet counts as far'
  );
});

test('eval.nearTargetEveryVersions: once the last evaluation is within the margin of the target, evaluations come denser', () => {
  // Versions at which evaluations start (one new version served per tick); each evaluation records
  // `rateAt(version)` on both families (family b stays at `other`).
  const evalVersions = (evalConfig: Record<string, unknown>, rateAt: (v: number) => number, other = 1): number[] => {
    const s = state({ campaign: { targetSuccess: 0.9 }, eval: evalConfig });
    const seen: number[] = [];
    for (let v = 0; v <= 16; v++) {
      if (v > 0) serveNextVersion(s, v);
      for (const a of tick(s, { nowMs: v, continueAsNewDue: false })) {
        if (a.kind !== 'startEval') continue;
        seen.push(a.version);
        s.evaluation = null;
        const r = rateAt(a.version);
        recordEval(s, {
          version: a.version,
          successRate: (r + other) / 2,
          episodes: 16,
          atEpisodes: 0,
          atMs: 0,
          perFamily: { a: r, b: other },
          episodesPerFamily: { a: 8, b: 8 },
        });
      }
    }
    return seen;
  };
  const rising = (v: number) => Math.min(0.85, v / 10);
  const dense = { everyVersions: 4, nearTargetEveryVersions: 2, nearTargetMargin: 0.1 };
  assert.deepEqual(evalVersions({ everyVersions: 4 }, rising), [0, 4, 8, 12, 16], 'off (default): every 4');
  assert.deepEqual(
    evalVersions(dense, rising),
    [0, 4, 8, 10, 12, 14, 16],
    'v8 at 80 % ≥ 90 % − 10 %: every 2 from then on'
  );
  assert.deepEqual(
    evalVersions(dense, () => 0.95, 0.5),
    [0, 4, 8, 12, 16],
    'one family far below the target keeps the usual cadence'
  );
  assert.deepEqual(
    evalVersions({ ...dense, nearTargetMargin: 0.02 }, rising),
    [0, 4, 8, 12, 16],
    'a tighter margin: 85 % is not near 90 %'
  );
});

test('stop drains: nothing new starts, the served head is evaluated, then the campaign completes', () => {
  const s = state();
  tick(s, { nowMs: 0, continueAsNewDue: false });
  s.evaluation = null;
  s.lastEvalVersion = -1;
  s.stopRequested = true;
  assert.deepEqual(groupsOf(tick(s, { nowMs: 1, continueAsNewDue: false })), []);
  assert.equal(s.phase, 'draining');
  for (const id of Object.keys(s.inFlight)) recordGroupLost(s, id);
  assert.deepEqual(kinds(tick(s, { nowMs: 2, continueAsNewDue: false })), ['startEval']);
  s.evaluation = null;
  assert.deepEqual(kinds(tick(s, { nowMs: 3, continueAsNewDue: false })), ['complete']);
});

test('campaign.maxMinutes: the campaign drains once it has run that long (workflow time), not before', () => {
  const s = state({ campaign: { maxMinutes: 10 } });
  assert.ok(groupsOf(tick(s, { nowMs: 9 * 60_000, continueAsNewDue: false })).length > 0);
  assert.equal(s.phase, 'running');
  assert.deepEqual(groupsOf(tick(s, { nowMs: 10 * 60_000, continueAsNewDue: false })), []);
  assert.equal(s.phase, 'draining');
  // Without a limit, time alone never stops a campaign.
  const unlimited = state();
  tick(unlimited, { nowMs: 1e12, continueAsNewDue: false });
  assert.equal(unlimited.phase, 'running');
});

test('sync mode: a batch, a barrier, a train step, a rollout to every server, then the next batch', () => {
  const s = state({ campaign: { mode: 'sync' }, trainer: { minGroups: 1, maxGroups: 2 } });
  s.lastEvalVersion = 0;
  const a1 = tick(s, { nowMs: 0, continueAsNewDue: false });
  assert.deepEqual(groupsOf(a1), ['c-g000000', 'c-g000001']);
  recordGroup(s, summary('c-g000000', 'a', [1, 0, 0, 0, 0, 0, 0, 0]), 0);
  assert.deepEqual(kinds(tick(s, { nowMs: 1, continueAsNewDue: false })), [], 'barrier: one group still out');
  recordGroup(s, summary('c-g000001', 'b', [1, 1, 1, 1, 1, 1, 1, 1]), 0);
  assert.deepEqual(kinds(tick(s, { nowMs: 2, continueAsNewDue: false })), ['startTrainStep']);
  adoptTrainedVersion(s, { version: 1, fromVersion: 0 });
  s.train = null;
  assert.deepEqual(kinds(tick(s, { nowMs: 3, continueAsNewDue: false })), ['startRollout']);
  applyRolloutOutcome(s, { version: 1, ok: true, servedVersions: { s1: 1, s2: 1 } });
  assert.deepEqual(groupsOf(tick(s, { nowMs: 4, continueAsNewDue: false })), ['c-g000002', 'c-g000003']);
});

test('dynamic max steps: the historical longest success, and the full budget again for a failing task', () => {
  const s = state({ rollout: { envConcurrency: 16, maxSteps: 10 } });
  s.inFlight.g = { groupId: 'g', taskId: 'a', n: 2, startedAtMs: 0, run: 0 };
  recordGroup(s, summary('g', 'a', [1, 0]), 0);
  assert.equal(rolloutPlanFor(s, task('a')).maxSteps, 2, 'longest success: 2 steps');
  // a long window of failures does not forget the longest success, but lets the budget grow back
  for (let i = 0; i < 20; i++) {
    s.inFlight[`f${i}`] = { groupId: `f${i}`, taskId: 'a', n: 2, startedAtMs: 0, run: 0 };
    recordGroup(s, summary(`f${i}`, 'a', [0, 0]), 0);
  }
  assert.equal(s.stats.a!.longestSuccess, 2);
  assert.equal(rolloutPlanFor(s, task('a')).maxSteps, 10);
});

test('the buffer is bounded; the pool size counts the newest k successes', () => {
  const s = state();
  for (let i = 0; i < bufferCapacity(s.config) + 3; i++) {
    s.inFlight[`g${i}`] = { groupId: `g${i}`, taskId: 'a', n: 2, startedAtMs: 0, run: 0 };
    recordGroup(s, summary(`g${i}`, 'a', [1, 0]), 2);
  }
  const dropped = trimBuffer(s);
  assert.deepEqual(
    dropped.map((g) => g.groupId),
    ['g0', 'g1', 'g2'],
    'the oldest go first'
  );
  assert.equal(s.buffer.length, bufferCapacity(s.config));
  assert.equal(s.stats.a!.poolSize, s.config.curation.precollectSuccessesPerTask);
});

test('a full buffer drops the groups no train step could use first, so groups with signal add up to a batch', () => {
  // minGroups 2, maxGroups 2 → capacity 8. A saturated task (all successes: above accMax) floods the buffer
  // between the rare groups with signal; oldest-first trimming pushed every one of those out before a
  // second one arrived, and no train step ever started.
  const s = state({ trainer: { minGroups: 2, maxGroups: 2 } });
  const cap = bufferCapacity(s.config);
  const finish = (id: string, rewards: number[]) => {
    s.inFlight[id] = { groupId: id, taskId: 'a', n: rewards.length, startedAtMs: 0, run: 0 };
    recordGroup(s, summary(id, 'a', rewards), 0);
    return trimBuffer(s);
  };
  finish('signal-1', [1, 0]);
  const dropped: string[] = [];
  for (let i = 0; i < 3 * cap; i++) dropped.push(...finish(`saturated-${i}`, [1, 1]).map((g) => g.groupId));
  assert.ok(!dropped.includes('signal-1'), 'the group with signal stays while untrainable ones arrive');
  assert.equal(selectTrainBatch(s), null, 'one trainable group is below minGroups');
  finish('signal-2', [0, 1]);
  const batch = selectTrainBatch(s);
  assert.deepEqual(
    batch?.groups.map((g) => g.groupId),
    ['signal-1', 'signal-2']
  );
  assert.equal(s.buffer.length, cap);
  // Runs recorded before the change (patched false) keep dropping the oldest, signal or not.
  const old = state({ trainer: { minGroups: 2, maxGroups: 2 } });
  old.inFlight.o = { groupId: 'o', taskId: 'a', n: 2, startedAtMs: 0, run: 0 };
  recordGroup(old, summary('o', 'a', [1, 0]), 0);
  let oldDropped: string[] = [];
  for (let i = 0; i < cap; i++) {
    old.inFlight[`x${i}`] = { groupId: `x${i}`, taskId: 'a', n: 2, startedAtMs: 0, run: 0 };
    recordGroup(old, summary(`x${i}`, 'a', [1, 1]), 0);
    oldDropped = [...oldDropped, ...trimBuffer(old, { untrainableFirst: false }).map((g) => g.groupId)];
  }
  assert.deepEqual(oldDropped, ['o']);
});

test("MiniWoB's −1 failures: curation and the task's success rate read success indicators, the trainer the raw rewards", () => {
  const s = state({ trainer: { minGroups: 2, maxGroups: 2 } });
  const finish = (id: string, rewards: number[], mode = {}) => {
    s.inFlight[id] = { groupId: id, taskId: 'a', n: rewards.length, startedAtMs: 0, run: 0 };
    recordGroup(s, summary(id, 'a', rewards), 0, mode);
  };
  // One success in four: mean raw reward −0.5. Raw curation left the −1s out as DART's broken runs, so the
  // group had one valid reward ("too-few") and never trained; with success indicators it is 1 of 4.
  finish('quarter', [1, -1, -1, -1]);
  finish('half', [-1, 1]);
  assert.equal(selectTrainBatch(s, { successRewards: false }), null, 'raw rewards: nothing trainable');
  const batch = selectTrainBatch(s);
  assert.deepEqual(
    batch?.groups.map((g) => g.groupId),
    ['quarter', 'half']
  );
  assert.deepEqual(
    batch?.groups[0]!.trajectories.map((t) => t.reward).sort(),
    [-1, -1, -1, 1],
    'the trainer gets the raw rewards'
  );
  assert.deepEqual(s.stats.a!.recentRewards, [1, 0, 0, 0, 0, 1], 'the success rate counts the failures');
  assert.equal(rolloutPlanFor(s, task('a')).n, s.config.rollout.nMax, 'a 33 % task gets the most rollouts');
});

test('carried state: validated, versioned, migrated from v1, compact', () => {
  const s = state();
  tick(s, { nowMs: 0, continueAsNewDue: false });
  assert.deepEqual(validateCampaignState(JSON.parse(JSON.stringify(s))), JSON.parse(JSON.stringify(s)));
  const broken = { ...JSON.parse(JSON.stringify(s)), policyVersion: -3 };
  assert.throws(
    () => loadCarriedState(broken),
    (e: unknown) => e instanceof CampaignStateError && /policyVersion/.test(String(e))
  );
  assert.throws(() => loadCarriedState({ ...s, schemaVersion: 9 }), /schemaVersion 9.*reads 2/);
  // a state carried by the build before the lineage (schema v1)
  const v1 = {
    ...JSON.parse(JSON.stringify(s)),
    policyVersion: 3,
    buffer: [summary('c-g000000', 'a', [1, 0], 3)],
    outcomes: { a: [{ reward: 1, numSteps: 7 }] },
  };
  for (const k of ['schemaVersion', 'lineage', 'endpoints', 'train', 'rollout', 'evaluation', 'pendingRollout'])
    delete v1[k];
  const migrated = migrateV1(v1);
  assert.deepEqual(ancestry(migrated.lineage, 3, 10), [3, 2, 1, 0]);
  assert.equal(migrated.stats.a!.longestSuccess, 7);
  assert.equal(migrated.buffer[0]!.trajectories[0]!.manifestKey, undefined, 'derivable keys are not carried');
  // 256 envs' worth of in-flight groups and a full buffer stay far below Temporal's payload limit
  const big = state({ rollout: { envConcurrency: 2048 }, trainer: { maxGroups: 8, minGroups: 6 } });
  tick(big, { nowMs: 0, continueAsNewDue: false });
  for (let i = 0; i < 64; i++) {
    big.inFlight[`x${i}`] = { groupId: `x${i}`, taskId: 'a', n: 8, startedAtMs: 0, run: 0 };
    recordGroup(big, summary(`x${i}`, 'a', [1, 0, 0, 0, 1, 0, 0, 0]), 0);
    trimBuffer(big);
  }
  assert.ok(stateBytes(big) < 200 * 1024, `carried state ${stateBytes(big)} bytes`);
});

test('a pause is visible in the status during the warm start too, and resume clears it', () => {
  const s = state();
  s.phase = 'warm-start';
  s.paused = true;
  assert.equal(campaignStatus(s).phase, 'paused');
  s.paused = false;
  assert.equal(campaignStatus(s).phase, 'warm-start');
  s.phase = 'draining';
  s.paused = true;
  assert.equal(campaignStatus(s).phase, 'draining', 'a stop in progress is not hidden by a pause');
});
