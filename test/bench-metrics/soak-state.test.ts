/** A faults soak driven in segments (bench/lib/soak-state.ts, soak-metrics over windows): ledger, gaps, figures. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { EpisodeTimes, TrainStepTimes } from '../../bench/lib/efficiency-metrics';
import { soakBucketsOverWindows, soakTotals, soakTotalsOverWindows } from '../../bench/lib/soak-metrics';
import {
  closeSegment,
  driverAlive,
  readSoakState,
  segmentWindows,
  soakStatePath,
  writeSoakState,
  type SoakState,
} from '../../bench/lib/soak-state';

const fault = (index: number, recoverMs: number | null, error?: string): SoakState['faults'][number] => ({
  index,
  kind: 'env',
  trigger: 'episodes in flight',
  triggered: true,
  atMs: index * 1000,
  downMs: 500,
  recoveredBy: 'episodes > 1',
  recoverMs,
  ...(error ? { error } : {}),
  statusAtFault: { episodes: 1, trainSteps: 1, policyVersion: 1 },
});

const state = (): SoakState => ({
  version: 1,
  campaignId: 'soak-1-x',
  startedAt: 1_000,
  settings: { episodes: 100_000, trainSteps: 2_000, profile: 'osworld' },
  args: ['--state-dir', '/tmp/x'],
  cluster: {
    dataDir: '/tmp/x/cluster',
    ports: { temporal: 1, temporalUi: 2, minio: 3, minioConsole: 4, policyBase: 5 },
    orchestratorBuild: 'soak-build-1',
    retiredPolicyServers: [],
  },
  deploy: { fromRev: 'a', toRev: 'b', changedWorkflowFiles: ['workflows/campaign.ts'] },
  faults: [fault(0, 1200), fault(1, null), fault(2, null, 'no running task group')],
  segments: [{ startedAt: 1_000, lastAliveAt: 61_000, driverPid: 42, lastStatus: null }],
});

test('the state file round-trips, and a bad one is refused naming the file and the field', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'soak-state-'));
  try {
    assert.throws(() => readSoakState(dir), /no soak-state\.json there; pass the --state-dir/);
    writeSoakState(dir, state());
    assert.deepEqual(readSoakState(dir), state());
    assert.equal(fs.existsSync(`${soakStatePath(dir)}.tmp`), false, 'written by rename, no temp file left');
    fs.writeFileSync(soakStatePath(dir), '{"version": 1, "campaignId": ""');
    assert.throws(() => readSoakState(dir), /is not JSON/);
    fs.writeFileSync(soakStatePath(dir), JSON.stringify({ ...state(), segments: [] }));
    assert.throws(() => readSoakState(dir), /field "segments"/);
    fs.writeFileSync(soakStatePath(dir), JSON.stringify({ ...state(), version: 2 }));
    assert.throws(() => readSoakState(dir), /field "version".*another --state-dir/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('closing a segment marks only faults still waiting for their recovery as interrupted', () => {
  const closed = closeSegment(state(), 'planned crash');
  assert.equal(closed.segments[0]!.endedBy, 'planned crash');
  assert.deepEqual(
    closed.faults.map((f) => f.interruptedBySegmentEnd ?? false),
    [false, true, false] // recovered; waiting → interrupted; failed to inject (an error, not a recovery question)
  );
  assert.equal(closeSegment(state(), undefined).segments[0]!.endedBy, undefined);
});

test('segment windows: the first opens at the first lease, the last ends at the stop, gaps stay out', () => {
  const segs = [
    { startedAt: 0, lastAliveAt: 100_000, driverPid: 1, lastStatus: null },
    { startedAt: 500_000, lastAliveAt: 550_000, driverPid: 2, lastStatus: null },
  ];
  assert.deepEqual(segmentWindows(segs, 10_000, 700_000), [
    { start: 10_000, end: 100_000 },
    { start: 500_000, end: 700_000 },
  ]);
  // No lease known: the segment's own start; a stop before a segment's start never gives a negative window.
  assert.deepEqual(segmentWindows(segs.slice(0, 1), null, -5), [{ start: 0, end: 0 }]);
});

test('figures over segments count only up-time: the gap is neither busy nor idle', () => {
  const ep = (a: number, b: number): EpisodeTimes => ({
    numSteps: 1,
    acquiredAt: a,
    endedAt: b,
    envIntervals: [[a, b]],
  });
  // One slot busy the whole of both windows; the 1,000 s gap between them has nothing running.
  const episodes = [ep(0, 100_000), ep(1_100_000, 1_200_000)];
  const steps: TrainStepTimes[] = [{ startedAt: 1_100_000, endedAt: 1_150_000, actions: 1 }];
  const windows = [
    { start: 0, end: 100_000 },
    { start: 1_100_000, end: 1_200_000 },
  ];
  const t = soakTotalsOverWindows(episodes, steps, 1, windows);
  assert.equal(t.windowSeconds, 200);
  assert.equal(t.envUtilization, 1);
  assert.equal(t.episodes, 2);
  assert.equal(t.trainSteps, 1);
  assert.equal(t.trainerIdleSeconds, 150); // 100 s of the first window + 50 s of the second
  assert.equal(t.trainerIdle, 0.75);
  // Over one window spanning the gap, the same run would look 5.5× less utilized.
  assert.ok(soakTotals(episodes, steps, 1, { start: 0, end: 1_200_000 }).envUtilization < 0.17);
  const b = soakBucketsOverWindows(episodes, steps, 1, windows, 50_000);
  assert.deepEqual(
    b.map((x) => [x.segment, x.startS, x.endS, x.envUtilization]),
    [
      [0, 0, 50, 1],
      [0, 50, 100, 1],
      [1, 100, 150, 1],
      [1, 150, 200, 1],
    ]
  );
});

test('a driver PID that is gone, or not a soak, does not block a resume', () => {
  assert.equal(driverAlive(2 ** 22 + 12_345), false);
  assert.equal(driverAlive(process.pid), process.argv.join(' ').includes('soak'));
});
