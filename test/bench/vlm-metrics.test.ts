import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compareThroughput,
  distribution,
  reloadLatencyByServer,
  reloadSamples,
  runPool,
  trainerTiming,
  type RolloutEvent,
} from '../../bench/lib/vlm-metrics';

describe('VLM bench summaries (bench/lib/vlm-metrics.ts)', () => {
  it('reads completed reloadPolicy activities only, with the server, the load time and the dispatch time', () => {
    const events: RolloutEvent[] = [
      { kind: 'scheduled', eventId: '5', at: 1000, taskQueue: 'policy-vlm-a', activity: 'reloadPolicy' },
      { kind: 'completed', scheduledEventId: '5', at: 1400, result: { serverId: 'vlm-a', version: 3, loadMs: 350 } },
      { kind: 'scheduled', eventId: '9', at: 2000, taskQueue: 'orchestrator', activity: 'runEpisode' },
      { kind: 'completed', scheduledEventId: '9', at: 2500, result: { serverId: 'x', version: 1, loadMs: 1 } },
      // refused: no completion; a completion without its schedule is ignored too
      { kind: 'scheduled', eventId: '12', at: 3000, taskQueue: 'policy-vlm-b', activity: 'reloadPolicy' },
      { kind: 'completed', scheduledEventId: '77', at: 3100, result: { serverId: 'vlm-b', version: 4, loadMs: 10 } },
      { kind: 'scheduled', eventId: '15', at: 3500, taskQueue: 'policy-vlm-b', activity: 'reloadPolicy' },
      {
        kind: 'completed',
        scheduledEventId: '15',
        at: 3510,
        result: { serverId: 'vlm-b', version: 0, loadMs: 0, unchanged: true },
      },
      { kind: 'scheduled', eventId: '20', at: 4000, taskQueue: 'policy-vlm-b', activity: 'reloadPolicy' },
      { kind: 'completed', scheduledEventId: '20', at: 4900, result: { serverId: 'vlm-b', version: 4, loadMs: 800 } },
    ];
    const samples = reloadSamples(events);
    assert.deepEqual(samples, [
      { serverId: 'vlm-a', version: 3, loadMs: 350, activityMs: 400 },
      { serverId: 'vlm-b', version: 4, loadMs: 800, activityMs: 900 },
    ]);
    const by = reloadLatencyByServer(samples);
    assert.deepEqual(Object.keys(by).sort(), ['vlm-a', 'vlm-b']);
    assert.equal(by['vlm-b']!.loadMs.p50, 800);
    assert.equal(by['vlm-a']!.activityMs.max, 400);
  });

  it('gives nearest-rank percentiles and null for no samples', () => {
    assert.equal(distribution([]), null);
    const d = distribution([5, 1, 4, 2, 3, 10, 9, 8, 7, 6])!;
    assert.deepEqual(d, { n: 10, mean: 5.5, p50: 5, p90: 9, max: 10 });
  });

  it('separates the warm start (from v0) from RL steps and reads their times', () => {
    const t = trainerTiming(
      [
        {
          trainStep: 2,
          fromVersion: 1,
          toVersion: 2,
          consumed: 16,
          metrics: { stepSeconds: 4 },
          startedAt: 0,
          createdAt: 6000,
        },
        {
          trainStep: 1,
          fromVersion: 0,
          toVersion: 1,
          consumed: 64,
          metrics: { loss: 1 },
          startedAt: 0,
          createdAt: 90_000,
        },
        {
          trainStep: 3,
          fromVersion: 2,
          toVersion: 3,
          consumed: 8,
          metrics: { stepSeconds: 2 },
          startedAt: 10_000,
          createdAt: 13_000,
        },
      ],
      true
    );
    assert.equal(t.bcSeconds, 90);
    assert.equal(t.rlSteps, 2);
    assert.deepEqual(t.rlStepSeconds, { n: 2, mean: 3, p50: 2, p90: 4, max: 4 });
    assert.deepEqual(t.rlWallSeconds, { n: 2, mean: 4.5, p50: 3, p90: 6, max: 6 });
    assert.equal(t.rlTrajectoriesPerStep!.mean, 12);
    // Without a warm start the step from v0 is an RL step.
    assert.equal(
      trainerTiming([{ trainStep: 1, fromVersion: 0, toVersion: 1, consumed: 1, metrics: {}, createdAt: 1 }], false)
        .rlSteps,
      1
    );
  });

  it('compares tokens/s of the two windows', () => {
    const c = compareThroughput(
      { tokens: 800, requests: 40, seconds: 10, concurrency: 4 },
      { tokens: 800, requests: 40, seconds: 8, concurrency: 4 }
    );
    assert.equal(c.dartflow.tokensPerSecond, 80);
    assert.equal(c.direct.tokensPerSecond, 100);
    assert.equal(c.ratio, 0.8);
    assert.equal(compareThroughput(c.dartflow, { tokens: 0, requests: 0, seconds: 0, concurrency: 1 }).ratio, 0);
  });

  it('runs a pool at most `concurrency` at a time and keeps the input order', async () => {
    let running = 0;
    let peak = 0;
    const out = await runPool([30, 10, 20, 5, 15], 2, async (ms) => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, ms));
      running--;
      return ms * 2;
    });
    assert.deepEqual(out, [60, 20, 40, 10, 30]);
    assert.equal(peak, 2);
  });
});
