import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compareThroughput,
  distribution,
  reloadLatencyByServer,
  reloadSamples,
  cacheHitRates,
  runLanes,
  vllmCacheCounters,
  vllmQueueGauges,
  batchOccupancy,
  runPool,
  steadyTokensPerSecond,
  poolWindows,
  trainerTiming,
  turnCost,
  type RolloutEvent,
} from '../../bench/lib/vlm-metrics';

describe('VLM bench summaries (bench/lib/vlm-metrics.ts)', () => {
  it('steady-state tokens/s leaves out ramp-up and drain: the middle 80 % of tokens over its span', () => {
    // 10 answers of 10 tokens, one per second from t = 1 s, then a drain: the last answer 20 s later.
    const steady = Array.from({ length: 10 }, (_, i) => ({ at: (i + 1) * 1000, tokens: 10 }));
    const drained = [...steady.slice(0, 9), { at: 29_000, tokens: 10 }];
    // 10 % of 100 tokens is reached at t = 1 s, 90 % at t = 9 s: 80 tokens in 8 s.
    assert.equal(steadyTokensPerSecond(steady), 10);
    // The drain moves the whole-window rate (100 tokens / 29 s) but not the steady one.
    assert.equal(steadyTokensPerSecond(drained), 10);
    // Order of arrival in the input does not matter; a window with one answer has no span.
    assert.equal(steadyTokensPerSecond([...steady].reverse()), 10);
    assert.equal(steadyTokensPerSecond([{ at: 5, tokens: 32 }]), 0);
    assert.equal(steadyTokensPerSecond([]), 0);
  });

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

  it('pools windows of one kind: Σ tokens ÷ Σ seconds, cache rates weighted by requests', () => {
    const pooled = poolWindows([
      { tokens: 600, requests: 30, seconds: 10, concurrency: 4, envSlots: 8, prefixHitRate: 0.8, mmHitRate: null },
      { tokens: 400, requests: 10, seconds: 15, concurrency: 4, envSlots: 8, prefixHitRate: 0.4, mmHitRate: 0.5 },
    ]);
    assert.deepEqual(pooled, {
      tokens: 1000,
      requests: 40,
      seconds: 25,
      concurrency: 4,
      envSlots: 8,
      prefixHitRate: 0.7,
      mmHitRate: 0.5,
    });
    assert.throws(() => poolWindows([]), /no windows/);
    assert.throws(
      () =>
        poolWindows([
          { tokens: 1, requests: 1, seconds: 1, concurrency: 4 },
          { tokens: 1, requests: 1, seconds: 1, concurrency: 8 },
        ]),
      /different concurrency \(4\/-, 8\/-\)/
    );
  });

  it('costs a loop turn outside vLLM: the env-slot time not waiting on vLLM, the CPU of everything else', () => {
    // 8 slots for 30 s = 240 slot-seconds; 200 of them waiting on vLLM over 250 answers; 10 CPU-seconds outside vLLM.
    assert.deepEqual(
      turnCost({ envSlots: 8, busySeconds: 30, vllmSeconds: 200, answered: 250, otherCpuSeconds: 10, requests: 250 }),
      { wall: 0.16, cpu: 0.04 }
    );
    // Nothing answered: no cost to give (not a division by zero), and vLLM time above the slots' is clamped.
    assert.deepEqual(
      turnCost({ envSlots: 8, busySeconds: 0, vllmSeconds: 0, answered: 0, otherCpuSeconds: 3, requests: 0 }),
      { wall: null, cpu: null }
    );
    assert.equal(
      turnCost({ envSlots: 1, busySeconds: 1, vllmSeconds: 2, answered: 2, otherCpuSeconds: 0, requests: 2 }).wall,
      0
    );
  });

  it('mirrored rounds take most of a drift out of the ratio that a single round hands the window run first', () => {
    // Both sides truly equal (100 tokens/s at full speed); the machine slows 10 % per window over the set.
    const speed = [1, 0.9, 0.8, 0.7];
    const at = (slot: number) => ({ tokens: 1000, requests: 50, seconds: 1000 / (100 * speed[slot]!), concurrency: 4 });
    const single = compareThroughput(at(0), at(1)).ratio; // loop, direct
    const mirrored = compareThroughput(poolWindows([at(0), at(3)]), poolWindows([at(1), at(2)])).ratio; // L D D L
    assert.ok(single > 1.1, `a single round favours the loop: ${single}`);
    assert.ok(Math.abs(mirrored - 1) < 0.03, `mirrored rounds: ${mirrored}`);
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

  it('runs lanes that each take the next job when free, never more than one job per lane at once', async () => {
    const busy = [0, 0, 0];
    const peaks = [0, 0, 0];
    const served: number[][] = [[], [], []];
    // Lanes 0 and 1 are one server's two batch slots, lane 2 the other server's single slot.
    const lane = (i: number) => async (job: number) => {
      busy[i]!++;
      peaks[i] = Math.max(peaks[i]!, busy[i]!);
      served[i]!.push(job);
      await new Promise((r) => setTimeout(r, 5));
      busy[i]!--;
      return job + 100;
    };
    const jobs = [0, 1, 2, 3, 4, 5, 6, 7, 8];
    const out = await runLanes(jobs, [lane(0), lane(1), lane(2)]);
    assert.deepEqual(
      out,
      jobs.map((j) => j + 100)
    );
    assert.deepEqual(peaks, [1, 1, 1]);
    assert.deepEqual(
      served.flat().sort((a, b) => a - b),
      jobs
    );
    assert.ok(
      served.every((s) => s.length > 0),
      'every lane takes jobs'
    );
    await assert.rejects(runLanes(jobs, []), /at least one lane/);
  });

  it("sums vLLM's cache counters over engines and gives the hit rates of a window", () => {
    const text = (q: number, h: number) =>
      [
        '# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.',
        '# TYPE vllm:prefix_cache_queries_total counter',
        `vllm:prefix_cache_queries_total{engine="0",model_name="dartflow"} ${q}`,
        `vllm:prefix_cache_hits_total{engine="0",model_name="dartflow"} ${h}`,
        `vllm:prefix_cache_hits_created{engine="0",model_name="dartflow"} 1.7e9`,
        `vllm:mm_cache_queries_total{engine="0",model_name="dartflow"} 10.0`,
        `vllm:mm_cache_hits_total{engine="0",model_name="dartflow"} 4.0`,
      ].join('\n');
    const before = vllmCacheCounters([text(100, 50), text(300, 100)]);
    assert.deepEqual(before, { prefixQueries: 400, prefixHits: 150, mmQueries: 20, mmHits: 8 });
    const after = vllmCacheCounters([text(200, 80), text(500, 170)]);
    assert.deepEqual(cacheHitRates(before, after), { prefixHitRate: 0.333, mmHitRate: null });
  });
  it("reads vLLM's running/waiting gauges and how full a server's batch was over a window", () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="dartflow"} 2.0',
      'vllm:num_requests_running_total{engine="0"} 99.0',
      'vllm:num_requests_waiting{engine="0",model_name="dartflow"} 3.0',
    ].join('\n');
    assert.deepEqual(vllmQueueGauges(text), { running: 2, waiting: 3 });
    assert.equal(vllmQueueGauges('# nothing here\nvllm:other 1'), null);
    const occ = batchOccupancy(
      [
        { running: 2, waiting: 1 },
        { running: 1, waiting: 0 },
        { running: 0, waiting: 0 },
        { running: 2, waiting: 3 },
      ],
      2
    );
    assert.deepEqual(occ, { samples: 4, meanRunning: 1.25, meanWaiting: 1, underfilled: 0.5, idle: 0.25 });
    assert.equal(batchOccupancy([], 2), null);
  });
});
