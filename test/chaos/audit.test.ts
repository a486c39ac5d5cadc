/** The chaos audit's pure parts: the seeded schedule, discard reasons, and each invariant failing when broken. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { auditCampaign, type AuditInput } from '../../infra/chaos-audit';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { chaosSchedule, countTrainStepOutcome, emptyHistoryStats, FAULT_KINDS } from '../../infra/chaos';
import type { GroupSummary, TrajectorySummary } from '../../schemas/campaign';
import { batchDiscards, failedStepDiscards, groupDiscards, lostDiscards } from '../../workflows/logic/discards';

test('chaosSchedule: every kind once per round, deterministic per seed, down times in range', () => {
  const a = chaosSchedule(7, 3, { min: 100, max: 200 });
  assert.deepEqual(a, chaosSchedule(7, 3, { min: 100, max: 200 }));
  assert.notDeepEqual(a, chaosSchedule(8, 3, { min: 100, max: 200 }));
  assert.equal(a.length, 3 * FAULT_KINDS.length);
  for (let r = 0; r < 3; r++)
    assert.deepEqual(
      a
        .slice(r * 6, r * 6 + 6)
        .map((f) => f.kind)
        .sort(),
      [...FAULT_KINDS].sort()
    );
  for (const f of a) assert.ok(f.downMs >= 100 && f.downMs <= 200, String(f.downMs));
});

/** A sound little campaign: v0 → v1 consumed g0's two episodes; g1 was skipped for zero advantage. */
function sound(): AuditInput {
  const m = (id: string, groupId: string, reward: number | null, status = 'ok') => ({
    trajectoryId: id,
    groupId,
    scope: 'campaign' as const,
    status,
    reward,
    source: 'rollout',
    numSteps: 2,
    stepIssue: null,
  });
  return {
    manifests: [
      m('g0-e0', 'g0', 1),
      m('g0-e1', 'g0', 0),
      m('g1-e0', 'g1', 1),
      m('g1-e1', 'g1', 1),
      m('g1-e2', 'g1', null, 'env_error'),
      { ...m('ev-0', 'ev', 1), scope: 'eval' },
    ],
    ledger: [
      {
        trainStep: 1,
        fromVersion: 0,
        toVersion: 1,
        consumed: [
          { trajectoryId: 'g0-e0', groupId: 'g0', reward: 1, injectedFromPool: false },
          { trajectoryId: 'g0-e1', groupId: 'g0', reward: 0, injectedFromPool: false },
        ],
      },
    ],
    checkpoints: [
      { version: 0, parentVersion: null },
      { version: 1, parentVersion: 0 },
    ],
    discards: [
      {
        groupId: 'g1',
        event: 'train',
        trajectories: [
          { trajectoryId: 'g1-e0', reason: 'curation:no-signal' },
          { trajectoryId: 'g1-e1', reason: 'curation:no-signal' },
        ],
      },
    ],
    groups: [
      {
        groupId: 'g0',
        summary: {
          trajectories: [
            { trajectoryId: 'g0-e0', reward: 1, injectedFromPool: false },
            { trajectoryId: 'g0-e1', reward: 0, injectedFromPool: false },
          ],
          lostTrajectoryIds: [],
          infraFailures: 0,
        },
        completedOk: { 'g0-e0': 1, 'g0-e1': 0 },
        failedAttempts: ['g0-e1'],
      },
      {
        groupId: 'g1',
        summary: {
          trajectories: [
            { trajectoryId: 'g1-e0', reward: 1, injectedFromPool: false },
            { trajectoryId: 'g1-e1', reward: 1, injectedFromPool: false },
          ],
          lostTrajectoryIds: ['g1-e2'],
          infraFailures: 1,
        },
        completedOk: { 'g1-e0': 1, 'g1-e1': 1 },
        failedAttempts: ['g1-e2'],
      },
    ],
  };
}

test('auditCampaign: a sound campaign has no problems and its counts add up', () => {
  const r = auditCampaign(sound());
  assert.deepEqual(r.problems, []);
  assert.equal(r.trajectories.ok, 5);
  assert.equal(r.trajectories.consumed, 2);
  assert.deepEqual(r.trajectories.accounted, { 'curation:no-signal': 2, eval: 1 });
  assert.equal(r.trajectories.unaccounted, 0);
  assert.equal(r.versions, 2);
  assert.equal(r.episodesWithFailedAttempts, 2);
  assert.equal(r.failedAttemptsRecoveredOk, 1);
  assert.equal(r.lostEpisodes, 1);
});

const problemsOf = (mutate: (a: AuditInput) => void): string[] => {
  const a = sound();
  mutate(a);
  return auditCampaign(a).problems;
};

test('auditCampaign: a trajectory consumed twice is found', () => {
  const p = problemsOf((a) =>
    a.ledger.push({
      trainStep: 2,
      fromVersion: 1,
      toVersion: 2,
      consumed: [{ trajectoryId: 'g0-e0', groupId: 'g0', reward: 1, injectedFromPool: false }],
    })
  );
  assert.ok(
    p.some((x) => /consumed by train steps 1 and 2/.test(x)),
    p.join('\n')
  );
  assert.ok(
    p.some((x) => /v2 is missing/.test(x)),
    p.join('\n')
  );
});

test('auditCampaign: an ok trajectory neither consumed nor discarded is unaccounted', () => {
  const p = problemsOf((a) => (a.discards = []));
  assert.equal(p.filter((x) => /neither consumed nor accounted/.test(x)).length, 2, p.join('\n'));
});

test('auditCampaign: a group the trainer left out (object missing or corrupt) is accounted for and reported', () => {
  // What the soak once showed as 23 unaccounted trajectories: whole groups the trainer skipped because one
  // trajectory's steps no longer matched their recorded sha256 (two attempts had written them).
  const input = sound();
  input.discards = [];
  input.ledger[0]!.skipped = [{ groupId: 'g1', reason: 'corrupt object …/steps.jsonl: sha256 does not match' }];
  const r = auditCampaign(input);
  assert.equal(r.trajectories.unaccounted, 0);
  assert.equal(r.trajectories.accounted['trainer-skipped'], 2);
  assert.deepEqual(
    r.problems.filter((x) => /left group g1 out: corrupt object/.test(x)),
    ['train step 1 left group g1 out: corrupt object …/steps.jsonl: sha256 does not match']
  );
});

test('auditCampaign: a broken checkpoint chain or a gap in versions is found', () => {
  assert.ok(problemsOf((a) => (a.checkpoints[1]!.parentVersion = null)).some((x) => /broken chain/.test(x)));
  assert.ok(problemsOf((a) => (a.checkpoints[1]!.parentVersion = 5)).some((x) => /broken chain/.test(x)));
  assert.ok(problemsOf((a) => a.checkpoints.push({ version: 3, parentVersion: 1 })).some((x) => /not 0\.\.n/.test(x)));
});

test('auditCampaign: an infrastructure failure recorded as reward 0 is found', () => {
  // the failed episode g1-e2 shows up in the group's summary with reward 0 and a fake ok manifest
  const p = problemsOf((a) => {
    a.groups[1]!.summary!.trajectories.push({ trajectoryId: 'g1-e2', reward: 0, injectedFromPool: false });
    a.groups[1]!.summary!.lostTrajectoryIds = [];
    a.manifests[4] = { ...a.manifests[4]!, status: 'ok', reward: 0 };
    a.discards[0]!.trajectories.push({ trajectoryId: 'g1-e2', reason: 'curation:no-signal' });
  });
  assert.ok(
    p.some((x) => /infrastructure failure became a reward/.test(x)),
    p.join('\n')
  );
  // a failed manifest that keeps a reward
  assert.ok(problemsOf((a) => (a.manifests[4]!.reward = 0)).some((x) => /status env_error but reward 0/.test(x)));
  // a lost episode that was trained on
  assert.ok(
    problemsOf((a) =>
      a.ledger[0]!.consumed.push({ trajectoryId: 'g1-e2', groupId: 'g1', reward: 0, injectedFromPool: false })
    ).some((x) => /lost episode g1-e2 was trained on/.test(x))
  );
  // a step that no policy server answered
  assert.ok(
    problemsOf((a) => (a.manifests[0]!.stepIssue = 'a step without a policy server answer')).some((x) =>
      /without a policy server/.test(x)
    )
  );
  // the ledger's reward differs from the manifest's
  assert.ok(
    problemsOf((a) => (a.ledger[0]!.consumed[1]!.reward = 1)).some((x) =>
      /trained with reward 1, manifest says 0/.test(x)
    )
  );
});

const traj = (id: string, groupId: string, reward: number | null, v: number, pool = false): TrajectorySummary => ({
  trajectoryId: id,
  manifestKey: `k/${id}`,
  taskId: 't',
  groupId,
  reward,
  status: reward === null ? 'env_error' : 'ok',
  numSteps: 1,
  minPolicyVersion: v,
  maxPolicyVersion: v,
  injectedFromPool: pool,
});
const group = (groupId: string, ts: TrajectorySummary[], lost?: string[]): GroupSummary => ({
  groupId,
  taskId: 't',
  seed: 1,
  requested: ts.length,
  maxSteps: 4,
  trajectories: ts,
  infraFailures: lost?.length ?? 0,
  ...(lost ? { lostTrajectoryIds: lost } : {}),
  startedAt: 0,
  endedAt: 1,
});

test('discards: a train step records skipped, stale and down-sampled trajectories; pool entries never', () => {
  const buffer = [
    group('a', [traj('a0', 'a', 1, 5), traj('a1', 'a', 0, 5), traj('a2', 'a', 0, 3), traj('p', 'a', 1, 0, true)]),
    group('b', [traj('b0', 'b', 1, 5), traj('b1', 'b', 1, 5)]),
  ];
  const out = batchDiscards(
    buffer,
    {
      groups: [
        {
          groupId: 'a',
          taskId: 't',
          trajectories: [
            { trajectoryId: 'a0', manifestKey: 'k', reward: 1, injectedFromPool: false },
            { trajectoryId: 'p', manifestKey: 'k', reward: 1, injectedFromPool: true },
          ],
        },
      ],
      takenGroupIds: ['a', 'b'],
      skipped: [{ groupId: 'b', reason: 'no-signal' }],
      allowedVersions: [5, 4],
    },
    (t) => t.maxPolicyVersion < 4
  );
  assert.deepEqual(out, [
    {
      groupId: 'a',
      taskId: 't',
      event: 'train',
      trajectories: [
        { trajectoryId: 'a1', reason: 'down-sampled' },
        { trajectoryId: 'a2', reason: 'stale' },
      ],
    },
    {
      groupId: 'b',
      taskId: 't',
      event: 'train',
      trajectories: [
        { trajectoryId: 'b0', reason: 'curation:no-signal' },
        { trajectoryId: 'b1', reason: 'curation:no-signal' },
      ],
    },
  ]);
  assert.deepEqual(
    groupDiscards([group('c', [traj('c0', 'c', 0, 1), traj('c1', 'c', null, 1)])], 'stop', 'unused-at-stop'),
    [{ groupId: 'c', taskId: 't', event: 'stop', trajectories: [{ trajectoryId: 'c0', reason: 'unused-at-stop' }] }]
  );
  assert.deepEqual(lostDiscards(group('d', [], ['d0'])), [
    { groupId: 'd', taskId: 't', event: 'lost', trajectories: [{ trajectoryId: 'd0', reason: 'lost-infra' }] },
  ]);
  assert.deepEqual(lostDiscards(group('e', [])), []);
  assert.deepEqual(failedStepDiscards([{ groupId: 'f', taskId: 't', trajectoryIds: ['f0'] }]), [
    {
      groupId: 'f',
      taskId: 't',
      event: 'failed-step',
      trajectories: [{ trajectoryId: 'f0', reason: 'train-step-failed' }],
    },
  ]);
});

test('auditCampaign: a branch after a rollback is sound; training on data of the abandoned branch is found', () => {
  // v0 → v1 (abandoned by a rollback) ; v0 → v2 trained on data sampled by v0: sound.
  const branched = (a: ReturnType<typeof sound>) => {
    a.checkpoints.push({ version: 2, parentVersion: 0 });
    a.ledger.push({
      trainStep: 2,
      fromVersion: 0,
      toVersion: 2,
      consumed: [{ trajectoryId: 'g1-e0', groupId: 'g1', reward: 1, injectedFromPool: false }],
    });
    a.discards[0]!.trajectories = [{ trajectoryId: 'g1-e1', reason: 'curation:no-signal' }];
    for (const m of a.manifests) Object.assign(m, { minPolicyVersion: 0, maxPolicyVersion: 0 });
  };
  const sound2 = auditCampaign(
    (() => {
      const a = sound();
      branched(a);
      return a;
    })()
  );
  assert.deepEqual(sound2.problems, []);
  assert.equal(sound2.trainedFromAbandonedBranch, 0);
  // the same step consuming a trajectory sampled by the abandoned v1
  const p = problemsOf((a) => {
    branched(a);
    Object.assign(a.manifests[2]!, { minPolicyVersion: 1, maxPolicyVersion: 1 });
  });
  assert.ok(
    p.some((x) => /consumed g1-e0, sampled by v1\.\.v1 off its lineage/.test(x)),
    p.join('\n')
  );
});

test('countTrainStepOutcome: failed train-step children are counted with their errors, ok ones are not', () => {
  const completed = (outcome: object) => [
    {
      eventType: temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
      workflowExecutionCompletedEventAttributes: { result: { payloads: [defaultPayloadConverter.toPayload(outcome)] } },
    },
  ];
  const stats = emptyHistoryStats();
  countTrainStepOutcome(completed({ ok: true, trainStep: 1, version: 1 }), stats);
  countTrainStepOutcome(
    completed({ ok: false, trainStep: 2, error: 'InvalidTrainInput: no fresh, trainable step' }),
    stats
  );
  countTrainStepOutcome([], stats); // still running: nothing to count
  assert.equal(stats.failedTrainSteps, 1);
  assert.deepEqual(stats.trainStepErrors, ['step 2: InvalidTrainInput: no fresh, trainable step']);
});
