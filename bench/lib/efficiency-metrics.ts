/**
 * DART's efficiency metrics (dart-spec §5.2) computed from recorded timestamps — pure, no I/O, so the
 * definitions are unit-tested with hand-computed values (test/bench-metrics/).
 *
 * - env utilization: share of env-slot time spent inside env operations (reset/step/observe/evaluate),
 *   Σ env intervals ∩ window / (slots × window length);
 * - rollout throughput: agent actions per minute (an episode's steps counted pro rata to how much of its
 *   env lease lies inside the window);
 * - training throughput: actions of trajectories consumed by train steps that committed inside the window,
 *   per minute (DART's "actions turned into training samples per wall-clock minute");
 * - trainer utilization: share of the window during which a train step was running.
 */

export interface TimeWindow {
  start: number;
  end: number;
}

export interface EpisodeTimes {
  /** Agent actions (steps) of the episode. */
  numSteps: number;
  /** Env slot leased … released (trajectory stored). */
  acquiredAt: number;
  endedAt: number;
  /** Env operations as [start, end] pairs. */
  envIntervals: ReadonlyArray<readonly [number, number]>;
  /** Policy time and storage time (screenshot-upload waits + trajectory writes) inside the lease. */
  actMs?: number;
  storageMs?: number;
}

export interface TrainStepTimes {
  startedAt: number;
  endedAt: number;
  /** Actions (steps) of the online trajectories the step consumed. */
  actions: number;
}

export interface EfficiencyMetrics {
  windowSeconds: number;
  slots: number;
  episodes: number;
  envUtilization: number;
  rolloutActionsPerMin: number;
  trainSteps: number;
  trainedActionsPerMin: number;
  trainerUtilization: number;
}

/** Length of [a, b] inside the window (0 when disjoint or empty). */
export function overlap(a: number, b: number, w: TimeWindow): number {
  return Math.max(0, Math.min(b, w.end) - Math.max(a, w.start));
}

const windowMs = (w: TimeWindow): number => Math.max(0, w.end - w.start);

/** Σ of the intervals' parts inside the window / (slots × window). Overlapping intervals of one slot never occur. */
export function envUtilization(episodes: readonly EpisodeTimes[], slots: number, w: TimeWindow): number {
  const denom = slots * windowMs(w);
  if (denom <= 0) return 0;
  let busy = 0;
  for (const e of episodes) for (const [a, b] of e.envIntervals) busy += overlap(a, b, w);
  return busy / denom;
}

/** Actions per minute; an episode straddling a window edge counts the fraction of its lease inside. */
export function rolloutActionsPerMin(episodes: readonly EpisodeTimes[], w: TimeWindow): number {
  const ms = windowMs(w);
  if (ms <= 0) return 0;
  let actions = 0;
  for (const e of episodes) {
    const len = e.endedAt - e.acquiredAt;
    if (len <= 0) actions += e.acquiredAt >= w.start && e.acquiredAt <= w.end ? e.numSteps : 0;
    else actions += (e.numSteps * overlap(e.acquiredAt, e.endedAt, w)) / len;
  }
  return actions / (ms / 60_000);
}

/** Trained actions per minute: steps that committed inside the window. */
export function trainedActionsPerMin(steps: readonly TrainStepTimes[], w: TimeWindow): number {
  const ms = windowMs(w);
  if (ms <= 0) return 0;
  const actions = steps.filter((s) => s.endedAt > w.start && s.endedAt <= w.end).reduce((a, s) => a + s.actions, 0);
  return actions / (ms / 60_000);
}

/** Share of the window with a train step running (steps never overlap: one trainer slot). */
export function trainerUtilization(steps: readonly TrainStepTimes[], w: TimeWindow): number {
  const ms = windowMs(w);
  if (ms <= 0) return 0;
  return steps.reduce((a, s) => a + overlap(s.startedAt, s.endedAt, w), 0) / ms;
}

export function efficiencyMetrics(
  episodes: readonly EpisodeTimes[],
  steps: readonly TrainStepTimes[],
  slots: number,
  w: TimeWindow
): EfficiencyMetrics {
  return {
    windowSeconds: windowMs(w) / 1000,
    slots,
    episodes: episodes.filter((e) => overlap(e.acquiredAt, e.endedAt, w) > 0).length,
    envUtilization: envUtilization(episodes, slots, w),
    rolloutActionsPerMin: rolloutActionsPerMin(episodes, w),
    trainSteps: steps.filter((s) => s.endedAt > w.start && s.endedAt <= w.end).length,
    trainedActionsPerMin: trainedActionsPerMin(steps, w),
    trainerUtilization: trainerUtilization(steps, w),
  };
}

/** Where env-slot time went, as shares of slots × window (they sum to 1). */
export interface SlotTimeBreakdown {
  env: number;
  policy: number;
  storage: number;
  /** Inside an episode's lease but none of the above (bookkeeping, event loop). */
  otherInEpisode: number;
  /** No episode on the slot: scheduling (Temporal round trips), group and batch barriers, training pauses. */
  idle: number;
}

/**
 * Slot-time accounting. Env time is exact (intervals clipped to the window); policy and storage time of an
 * episode straddling a window edge are counted pro rata to the part of its lease inside the window.
 */
export function slotTimeBreakdown(episodes: readonly EpisodeTimes[], slots: number, w: TimeWindow): SlotTimeBreakdown {
  const total = slots * windowMs(w);
  if (total <= 0) return { env: 0, policy: 0, storage: 0, otherInEpisode: 0, idle: 0 };
  let env = 0;
  let policy = 0;
  let storage = 0;
  let leased = 0;
  for (const e of episodes) {
    const inside = overlap(e.acquiredAt, e.endedAt, w);
    const len = e.endedAt - e.acquiredAt;
    const frac = len > 0 ? inside / len : 0;
    leased += inside;
    for (const [a, b] of e.envIntervals) env += overlap(a, b, w);
    policy += (e.actMs ?? 0) * frac;
    storage += (e.storageMs ?? 0) * frac;
  }
  return {
    env: env / total,
    policy: policy / total,
    storage: storage / total,
    otherInEpisode: Math.max(0, leased - env - policy - storage) / total,
    idle: Math.max(0, total - leased) / total,
  };
}

/** a / b, or null when b is 0 (a ratio against nothing is not a number to print). */
export function ratio(a: number, b: number): number | null {
  return b === 0 ? null : a / b;
}

/** DART's reported numbers (dart-spec §5.2): non-decoupled → decoupled. */
export const DART_EFFICIENCY = {
  envUtilization: { sync: 0.122, async: 0.677 },
  trainingActionsPerMin: { sync: 22.6, async: 43.6 },
  gpuUtilization: { sync: 0.296, async: 0.467 },
} as const;
