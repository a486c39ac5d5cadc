/** The efficiency metrics of the benchmarks (bench/lib/efficiency-metrics.ts) against hand-computed values. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  efficiencyMetrics,
  envUtilization,
  overlap,
  ratio,
  rolloutActionsPerMin,
  slotTimeBreakdown,
  trainedActionsPerMin,
  trainerUtilization,
  type EpisodeTimes,
  type TrainStepTimes,
} from '../../bench/lib/efficiency-metrics';

const w = { start: 1_000, end: 61_000 }; // one minute

// Two slots. Episode A: lease 0–31 000 (starts before the window), env 0–10 000 and 20 000–30 000, 6 steps.
// Episode B: lease 31 000–61 000, env 31 000–61 000, 3 steps. Episode C: entirely after the window.
const A: EpisodeTimes = {
  numSteps: 6,
  acquiredAt: 0,
  endedAt: 31_000,
  envIntervals: [
    [0, 10_000],
    [20_000, 30_000],
  ],
  actMs: 3_100,
  storageMs: 310,
};
const B: EpisodeTimes = {
  numSteps: 3,
  acquiredAt: 31_000,
  endedAt: 61_000,
  envIntervals: [[31_000, 61_000]],
  actMs: 0,
  storageMs: 0,
};
const C: EpisodeTimes = { numSteps: 5, acquiredAt: 70_000, endedAt: 80_000, envIntervals: [[70_000, 80_000]] };

test('overlap clips an interval to the window', () => {
  assert.equal(overlap(0, 10_000, w), 9_000);
  assert.equal(overlap(20_000, 30_000, w), 10_000);
  assert.equal(overlap(70_000, 80_000, w), 0);
  assert.equal(overlap(50_000, 90_000, w), 11_000);
});

test('env utilization: env time inside the window over slots × window', () => {
  // (9 000 + 10 000 + 30 000) / (2 × 60 000) = 49 000 / 120 000
  assert.equal(envUtilization([A, B, C], 2, w), 49_000 / 120_000);
  assert.equal(envUtilization([], 2, w), 0);
  assert.equal(envUtilization([A], 2, { start: 5, end: 5 }), 0);
});

test('rollout throughput counts straddling episodes pro rata', () => {
  // A: 6 × 30 000/31 000; B: 3; C: 0 — per one minute.
  assert.ok(Math.abs(rolloutActionsPerMin([A, B, C], w) - ((6 * 30) / 31 + 3)) < 1e-9);
});

test('training throughput and trainer utilization from train step times', () => {
  const steps: TrainStepTimes[] = [
    { startedAt: 0, endedAt: 12_000, actions: 100 }, // commits inside: counts; 11 000 ms inside
    { startedAt: 30_000, endedAt: 45_000, actions: 50 }, // fully inside
    { startedAt: 55_000, endedAt: 70_000, actions: 80 }, // commits after the window: no actions, 6 000 ms inside
  ];
  assert.equal(trainedActionsPerMin(steps, w), 150);
  assert.equal(trainerUtilization(steps, w), (11_000 + 15_000 + 6_000) / 60_000);
  const m = efficiencyMetrics([A, B, C], steps, 2, w);
  assert.equal(m.windowSeconds, 60);
  assert.equal(m.episodes, 2);
  assert.equal(m.trainSteps, 2);
});

test('slot-time breakdown sums to one', () => {
  const b = slotTimeBreakdown([A, B, C], 2, w);
  // leased inside: A 30 000 + B 30 000 = 60 000 of 120 000; env 49 000; A's act 3 100 × 30/31 = 3 000, storage 300
  assert.equal(b.env, 49_000 / 120_000);
  assert.ok(Math.abs(b.policy - 3_000 / 120_000) < 1e-12);
  assert.ok(Math.abs(b.storage - 300 / 120_000) < 1e-12);
  assert.ok(Math.abs(b.otherInEpisode - (60_000 - 49_000 - 3_000 - 300) / 120_000) < 1e-12);
  assert.equal(b.idle, 0.5);
  assert.ok(Math.abs(b.env + b.policy + b.storage + b.otherInEpisode + b.idle - 1) < 1e-12);
});

test('ratio refuses a zero denominator', () => {
  assert.equal(ratio(67.7, 12.2), 67.7 / 12.2);
  assert.equal(ratio(1, 0), null);
});
