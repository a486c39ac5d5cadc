/** The soak benchmark's pure parts (bench/lib/soak-*.ts, history-stats): buckets, goals, fault plan, recovery. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { temporal } from '@temporalio/proto';
import type { EpisodeTimes, TrainStepTimes } from '../../bench/lib/efficiency-metrics';
import { runHistoryStats, runsInOrder, summarizeHistories } from '../../bench/lib/history-stats';
import { HISTORY_EVENT_WARN, soakGoals, type SoakFacts } from '../../bench/lib/soak-goals';
import { bucketWindows, soakBuckets, soakTotals, trainerIdle } from '../../bench/lib/soak-metrics';
import { isOneOff, ONE_OFF_FAULTS, recoveryFor, soakSchedule } from '../../bench/lib/soak-schedule';
import { chaosSchedule, FAULT_KINDS, isNondeterminismFailure } from '../../infra/chaos';
import type { CampaignStatus } from '../../schemas/campaign';

// A 10-minute window cut into two 5-minute buckets: [0, 300 000] and [300 000, 600 000]. One slot.
const w = { start: 0, end: 600_000 };
const ep = (acquiredAt: number, endedAt: number, env: Array<[number, number]>): EpisodeTimes => ({
  numSteps: 1,
  acquiredAt,
  endedAt,
  envIntervals: env,
});
// E1 inside bucket 0 (env 100 s); E2 straddles the boundary (env 250 000–350 000: 50 s in each bucket);
// E3 inside bucket 1 (env 60 s); E4 after the window.
const E1 = ep(0, 120_000, [[10_000, 110_000]]);
const E2 = ep(240_000, 360_000, [[250_000, 350_000]]);
const E3 = ep(400_000, 500_000, [[420_000, 480_000]]);
const E4 = ep(700_000, 800_000, [[700_000, 800_000]]);
// One step in bucket 0 (60 s), one straddling (270 000–330 000: 30 s each side).
const steps: TrainStepTimes[] = [
  { startedAt: 100_000, endedAt: 160_000, actions: 1 },
  { startedAt: 270_000, endedAt: 330_000, actions: 1 },
];

test('bucketWindows: consecutive 5-minute buckets, the last one cut at the window end', () => {
  assert.deepEqual(bucketWindows({ start: 1_000, end: 751_000 }), [
    { start: 1_000, end: 301_000 },
    { start: 301_000, end: 601_000 },
    { start: 601_000, end: 751_000 },
  ]);
  assert.deepEqual(bucketWindows({ start: 5, end: 5 }), []);
  assert.throws(() => bucketWindows(w, 0), /bucket length/);
});

test('soakBuckets: utilization clipped per bucket, counts where episodes and steps end', () => {
  const b = soakBuckets([E4, E3, E1, E2], steps, 1, w); // unsorted input on purpose
  assert.equal(b.length, 2);
  assert.deepEqual(
    b.map((x) => [x.startS, x.endS, x.episodes, x.trainSteps]),
    [
      [0, 300, 1, 1],
      [300, 600, 2, 1],
    ]
  );
  assert.equal(b[0]!.envUtilization, (100_000 + 50_000) / 300_000);
  assert.equal(b[1]!.envUtilization, (50_000 + 60_000) / 300_000);
  assert.equal(b[0]!.trainerIdle, 1 - (60_000 + 30_000) / 300_000);
  assert.equal(b[1]!.trainerIdle, 1 - 30_000 / 300_000);
});

test('soakTotals: whole-run figures equal the buckets combined', () => {
  const t = soakTotals([E1, E2, E3, E4], steps, 1, w);
  assert.equal(t.windowSeconds, 600);
  assert.equal(t.episodes, 3);
  assert.equal(t.trainSteps, 2);
  assert.equal(t.envUtilization, 260_000 / 600_000);
  assert.equal(t.trainerIdle, 1 - 120_000 / 600_000);
  assert.equal(t.trainerIdleSeconds, 480);
  const b = soakBuckets([E1, E2, E3, E4], steps, 1, w);
  assert.equal(
    b.reduce((a, x) => a + x.episodes, 0),
    t.episodes
  );
  assert.ok(Math.abs((b[0]!.envUtilization + b[1]!.envUtilization) / 2 - t.envUtilization) < 1e-12);
  assert.equal(trainerIdle([], { start: 3, end: 3 }), 1);
});

test('soakBuckets: a long episode that started buckets earlier still counts where it overlaps', () => {
  const long = ep(0, 590_000, [[0, 590_000]]);
  const short = ep(310_000, 320_000, [[310_000, 320_000]]);
  const b = soakBuckets([long, short], [], 2, w);
  assert.equal(b[1]!.envUtilization, (290_000 + 10_000) / (2 * 300_000));
  assert.equal(b[1]!.trainerIdle, 1);
});

const facts = (over: Partial<SoakFacts> = {}): SoakFacts => ({
  scenario: 'faults',
  episodes: 100_000,
  trainSteps: 2_000,
  wallMinutes: 200,
  largestHistoryEvents: 4_000,
  nondeterminismErrors: 0,
  unaccounted: 0,
  trainedFromAbandonedBranch: 0,
  auditProblems: 0,
  faultsByKind: { env: 1, deploy: 1 },
  requiredFaultKinds: ['env', 'deploy'],
  unrecoveredFaults: 0,
  deployChangedWorkflowFiles: 3,
  ...over,
});

test('soakGoals: all met at the targets; each shortfall is a goal not met', () => {
  assert.ok(soakGoals(facts()).every((g) => g.met));
  const short = soakGoals(
    facts({ episodes: 99_999, largestHistoryEvents: HISTORY_EVENT_WARN, faultsByKind: { env: 2 }, unaccounted: 1 })
  );
  const notMet = short.filter((g) => !g.met).map((g) => g.goal);
  assert.deepEqual(notMet, [
    'episodes in one campaign',
    'largest history of any run',
    'trajectories unaccounted',
    'every fault kind injected',
  ]);
  assert.equal(short.find((g) => g.goal === 'every fault kind injected')!.value, 'missing: deploy');
  // a deploy that changed only the build id is not the deploy of changed code the issue asks for
  const sameCode = soakGoals(facts({ deployChangedWorkflowFiles: 0 })).filter((g) => !g.met);
  assert.deepEqual(
    sameCode.map((g) => [g.goal, g.value]),
    [['deploy of a changed worker build', '0 workflow files changed']]
  );
  // point 9: an hour, no episode or step target
  const p9 = soakGoals(
    facts({ scenario: 'point9', wallMinutes: 6, requiredFaultKinds: undefined, unrecoveredFaults: undefined })
  );
  assert.deepEqual(
    p9.filter((g) => !g.met).map((g) => g.goal),
    ['scenario length']
  );
  assert.ok(!p9.some((g) => g.goal.startsWith('episodes')));
});

test('soakSchedule: deterministic, each one-off once at an index in [1, within), repeated kinds in chaos order', () => {
  const a = soakSchedule(3, 20, { oneOffWithin: 6 });
  assert.deepEqual(a, soakSchedule(3, 20, { oneOffWithin: 6 }));
  assert.notDeepEqual(a, soakSchedule(4, 20, { oneOffWithin: 6 }));
  assert.equal(a.length, 20);
  for (const k of ONE_OFF_FAULTS) {
    const at = a.map((f, i) => (f.kind === k ? i : -1)).filter((i) => i >= 0);
    assert.equal(at.length, 1, k);
    assert.ok(at[0]! >= 1 && at[0]! < 6, `${k} at ${at[0]}`);
  }
  const repeated = a.filter((f) => !isOneOff(f.kind));
  assert.deepEqual(repeated, chaosSchedule(3, 4).slice(0, 17));
  assert.deepEqual(
    new Set(a.slice(0, 9).map((f) => f.kind)),
    new Set([...FAULT_KINDS, ...ONE_OFF_FAULTS]),
    'the first 9 faults cover every kind'
  );
  assert.deepEqual(soakSchedule(1, 0), []);
  assert.equal(soakSchedule(1, 2).length, 2);
});

const status = (over: Partial<CampaignStatus>): CampaignStatus =>
  ({ episodes: 10, trainSteps: 3, policyVersion: 3, servedVersions: { p0: 3, p1: 2 }, ...over }) as CampaignStatus;

test('recoveryFor: train steps after a trainer kill, model sync after a server lost for good, episodes otherwise', () => {
  const at = status({});
  const t = recoveryFor('trainer', at);
  assert.equal(t.what, 'trainSteps > 3');
  assert.ok(!t.holds(status({ trainSteps: 3, episodes: 99 })) && t.holds(status({ trainSteps: 4 })));
  const p = recoveryFor('policy-for-good', at);
  assert.ok(!p.holds(status({ servedVersions: { p0: 3 } })));
  assert.ok(p.holds(status({ servedVersions: { p0: 4 } })));
  for (const k of ['env', 'deploy', 'terminate-child', 'temporal'] as const) {
    const r = recoveryFor(k, at);
    assert.ok(!r.holds(status({ episodes: 10 })) && r.holds(status({ episodes: 11 })), k);
  }
});

const ET = temporal.api.enums.v1.EventType;
const ts = (ms: number) => ({ seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 });

test('history stats: non-determinism failures counted by cause or message, runs ordered by start', () => {
  const nd = {
    eventType: ET.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    workflowTaskFailedEventAttributes: {
      cause: temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR,
    },
  };
  const byMessage = {
    eventType: ET.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    workflowTaskFailedEventAttributes: { failure: { message: '[TMPRL1100] Nondeterminism error: …' } },
  };
  const other = {
    eventType: ET.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    workflowTaskFailedEventAttributes: { failure: { message: 'CampaignStateError: schemaVersion 3' } },
  };
  assert.ok(isNondeterminismFailure(nd) && isNondeterminismFailure(byMessage));
  assert.ok(!isNondeterminismFailure(other));
  const run = (runId: string, startMs: number, extra: object[]) =>
    runHistoryStats(
      { workflowId: 'campaign-x', runId, type: 'campaignWorkflow' },
      {
        events: [{ eventId: 1, eventTime: ts(startMs), eventType: ET.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED }, ...extra],
      }
    );
  const r2 = run('b', 2_000_500, [other]);
  const r1 = run('a', 1_000_000, [nd, byMessage]);
  assert.equal(r1.startedAt, 1_000_000);
  assert.equal(r2.startedAt, 2_000_500);
  assert.equal(r1.nondeterminismErrors, 2);
  assert.equal(r1.events, 3);
  assert.deepEqual(
    runsInOrder([r2, r1], 'campaignWorkflow').map((r) => r.runId),
    ['a', 'b']
  );
  const s = summarizeHistories([r1, r2]);
  assert.equal(s.nondeterminismErrors, 2);
  assert.equal(s.largest?.runId, 'a');
});
