/**
 * The soak benchmark's whole-run and per-bucket figures (issue 12): env utilization and trainer idle time
 * over the whole run and per 5-minute bucket, episodes and train steps per bucket. Pure, built on the
 * efficiency definitions (bench/lib/efficiency-metrics.ts), unit-tested in test/bench-metrics/.
 */
import {
  envUtilization,
  trainerUtilization,
  type EpisodeTimes,
  type TimeWindow,
  type TrainStepTimes,
} from './efficiency-metrics';

export const SOAK_BUCKET_MS = 5 * 60_000;

export interface SoakBucket {
  /** Seconds since the window opened. */
  startS: number;
  endS: number;
  /** Episodes that ended (trajectory stored) in the bucket, train steps that committed in it. */
  episodes: number;
  trainSteps: number;
  envUtilization: number;
  /** Share of the bucket with no train step running. */
  trainerIdle: number;
}

export interface SoakTotals {
  windowSeconds: number;
  slots: number;
  episodes: number;
  trainSteps: number;
  envUtilization: number;
  trainerIdle: number;
  trainerIdleSeconds: number;
}

/** Consecutive buckets of `bucketMs` from the window's start; the last one ends with the window (may be short). */
export function bucketWindows(w: TimeWindow, bucketMs: number = SOAK_BUCKET_MS): TimeWindow[] {
  if (!(bucketMs > 0)) throw new Error(`bucket length must be > 0, got ${bucketMs}`);
  const out: TimeWindow[] = [];
  for (let start = w.start; start < w.end; start += bucketMs)
    out.push({ start, end: Math.min(w.end, start + bucketMs) });
  return out;
}

const endsIn = (t: number, w: TimeWindow) => t > w.start && t <= w.end;

/** Trainer idle = 1 − trainer utilization (steps never overlap: one trainer). 1 for an empty window. */
export function trainerIdle(steps: readonly TrainStepTimes[], w: TimeWindow): number {
  return w.end > w.start ? 1 - trainerUtilization(steps, w) : 1;
}

export function soakTotals(
  episodes: readonly EpisodeTimes[],
  steps: readonly TrainStepTimes[],
  slots: number,
  w: TimeWindow
): SoakTotals {
  const idle = trainerIdle(steps, w);
  const seconds = Math.max(0, w.end - w.start) / 1000;
  return {
    windowSeconds: seconds,
    slots,
    episodes: episodes.filter((e) => endsIn(e.endedAt, w)).length,
    trainSteps: steps.filter((s) => endsIn(s.endedAt, w)).length,
    envUtilization: envUtilization(episodes, slots, w),
    trainerIdle: idle,
    trainerIdleSeconds: idle * seconds,
  };
}

/**
 * Per-bucket figures. Episodes and steps are counted where they end, so the buckets sum to the totals;
 * utilization clips every env interval and train step to its bucket. Episodes are sorted once so each
 * bucket only looks at the episodes that can overlap it (10⁵ episodes × dozens of buckets stays cheap).
 */
export function soakBuckets(
  episodes: readonly EpisodeTimes[],
  steps: readonly TrainStepTimes[],
  slots: number,
  w: TimeWindow,
  bucketMs: number = SOAK_BUCKET_MS
): SoakBucket[] {
  const byStart = [...episodes].sort((a, b) => a.acquiredAt - b.acquiredAt);
  // The longest lease bounds how far before a bucket an overlapping episode can start.
  const longest = byStart.reduce((a, e) => Math.max(a, e.endedAt - e.acquiredAt), 0);
  return bucketWindows(w, bucketMs).map((b) => {
    const from = lowerBound(byStart, b.start - longest);
    const near: EpisodeTimes[] = [];
    for (let i = from; i < byStart.length && byStart[i]!.acquiredAt <= b.end; i++) near.push(byStart[i]!);
    return {
      startS: (b.start - w.start) / 1000,
      endS: (b.end - w.start) / 1000,
      episodes: near.filter((e) => endsIn(e.endedAt, b)).length,
      trainSteps: steps.filter((s) => endsIn(s.endedAt, b)).length,
      envUtilization: envUtilization(near, slots, b),
      trainerIdle: trainerIdle(steps, b),
    };
  });
}

/** First index whose acquiredAt ≥ t (binary search over episodes sorted by acquiredAt). */
function lowerBound(sorted: readonly EpisodeTimes[], t: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]!.acquiredAt < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Whole-run figures of a soak driven in segments (bench/lib/soak-state.ts): only the time the cluster was up
 * counts; the gaps between segments (the cluster down) are left out of the denominators, not counted idle.
 */
export function soakTotalsOverWindows(
  episodes: readonly EpisodeTimes[],
  steps: readonly TrainStepTimes[],
  slots: number,
  windows: readonly TimeWindow[]
): SoakTotals {
  const parts = windows.map((w) => soakTotals(episodes, steps, slots, w));
  const seconds = parts.reduce((a, p) => a + p.windowSeconds, 0);
  const idleSeconds = parts.reduce((a, p) => a + p.trainerIdleSeconds, 0);
  const weighted = (f: (p: SoakTotals) => number) =>
    seconds > 0 ? parts.reduce((a, p) => a + f(p) * p.windowSeconds, 0) / seconds : 0;
  return {
    windowSeconds: seconds,
    slots,
    episodes: parts.reduce((a, p) => a + p.episodes, 0),
    trainSteps: parts.reduce((a, p) => a + p.trainSteps, 0),
    envUtilization: weighted((p) => p.envUtilization),
    trainerIdle: seconds > 0 ? idleSeconds / seconds : 1,
    trainerIdleSeconds: idleSeconds,
  };
}

/**
 * Buckets of every segment, on one axis of up-time: a segment's buckets start where the previous segment's
 * up-time ended, so a chart shows the run without the hours the cluster was down; `segment` says which.
 */
export function soakBucketsOverWindows(
  episodes: readonly EpisodeTimes[],
  steps: readonly TrainStepTimes[],
  slots: number,
  windows: readonly TimeWindow[],
  bucketMs: number = SOAK_BUCKET_MS
): Array<SoakBucket & { segment: number }> {
  const out: Array<SoakBucket & { segment: number }> = [];
  let offsetS = 0;
  windows.forEach((w, segment) => {
    for (const b of soakBuckets(episodes, steps, slots, w, bucketMs))
      out.push({ ...b, startS: b.startS + offsetS, endS: b.endS + offsetS, segment });
    offsetS += Math.max(0, w.end - w.start) / 1000;
  });
  return out;
}
