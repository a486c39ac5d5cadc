/** Orchestration-overhead accounting (bench/lib/overhead-metrics.ts) against hand-computed values. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  episodeStorageMs,
  groupOverhead,
  summarizeOverhead,
  type GroupEpisodeTiming,
  type GroupHistoryTimes,
} from '../../bench/lib/overhead-metrics';

const h: GroupHistoryTimes = {
  groupId: 'g1',
  workflowStartedAt: 1_000,
  activityScheduledAt: 1_100, // 100 before the activity was scheduled
  activityStartedAt: 1_130, // 30 schedule → start
  activityCompletedAt: 2_400,
  workflowCompletedAt: 2_600, // 200 after the activity
};
const ep = (o: Partial<GroupEpisodeTiming>): GroupEpisodeTiming => ({
  queuedAt: 1_140,
  acquiredAt: 1_150,
  writeStartedAt: 2_000,
  envMs: 600,
  actMs: 150,
  actCalls: 5,
  uploadWaitMs: 10,
  stepsWriteMs: 20,
  numSteps: 4,
  ...o,
});

test('episode storage: upload wait plus one write when parallel, two when sequential', () => {
  assert.equal(episodeStorageMs(ep({})), 10 + 2 * 20);
  assert.equal(episodeStorageMs(ep({ writesParallel: true })), 10 + 20);
});

test('group overhead: workflow-seen time = slot wait + episode work + storage + temporal', () => {
  const eps = [ep({}), ep({ acquiredAt: 1_200, writeStartedAt: 2_300, uploadWaitMs: 4, stepsWriteMs: 8 })];
  const g = groupOverhead(h, eps)!;
  assert.equal(g.workflowSeenMs, 1_600);
  assert.equal(g.slotWaitMs, 10); // first acquire 1 150 − first queued 1 140
  assert.equal(g.episodeWorkMs, 1_150); // 2 300 − 1 150
  assert.equal(g.storageMs, 4 + 2 * 8); // the last episode's
  assert.equal(g.temporalMs, 1_600 - 10 - 1_150 - 20);
  assert.equal(g.beforeScheduleMs, 100);
  assert.equal(g.scheduleToStartMs, 30);
  assert.equal(g.afterActivityMs, 200);
  assert.equal(groupOverhead(h, []), null);
});

test('summary: shares over workflow-seen time minus slot wait, per-episode and per-step means', () => {
  const eps = [ep({}), ep({ acquiredAt: 1_200, writeStartedAt: 2_300, uploadWaitMs: 4, stepsWriteMs: 8 })];
  const g = groupOverhead(h, eps)!;
  const s = summarizeOverhead([g], eps);
  assert.equal(s.groups, 1);
  assert.equal(s.steps, 8);
  assert.equal(s.overheadShare, (20 + 420) / 1_590);
  assert.equal(s.storageShare, 20 / 1_590);
  assert.equal(s.perEpisode.envMs, 600);
  assert.equal(s.perEpisode.storageMs, (50 + 20) / 2);
  assert.equal(s.perStep.envMs, 1_200 / 8);
  assert.equal(s.perStep.actMs, 300 / 10);
});
