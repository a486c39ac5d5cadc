/**
 * The whole-suite goal of issue 14.4, as pure functions over a campaign's evaluations: held-out greedy
 * success ≥ 90 % on every tier-1 family and ≥ 80 % on every tier-2 family, in one evaluation, within the
 * window. bench/suite.ts runs the campaign; this file only reads its evaluation points.
 */
import type { EvalPoint } from '../../schemas/campaign';

/** Greedy success each tier's families must reach (issue 14.4). */
export const TIER_GOALS = { tier1: 0.9, tier2: 0.8 } as const;

export type Tier = keyof typeof TIER_GOALS;

/** family → its tier and goal, from the two tiers' family lists (tasks/suites/tier1.json, tier2.json). */
export function familyGoals(tiers: Record<Tier, readonly string[]>): Record<string, { tier: Tier; goal: number }> {
  const out: Record<string, { tier: Tier; goal: number }> = {};
  for (const tier of Object.keys(TIER_GOALS) as Tier[])
    for (const family of tiers[tier]) {
      if (out[family]) throw new Error(`family ${family} is in both tiers`);
      out[family] = { tier, goal: TIER_GOALS[tier] };
    }
  return out;
}

/** Whether one evaluation meets every family's goal (a family the evaluation lacks does not meet it). */
export function meetsGoals(e: EvalPoint, goals: Record<string, { goal: number }>): boolean {
  return Object.entries(goals).every(([f, g]) => (e.perFamily[f] ?? -1) >= g.goal);
}

const mean = (xs: number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/**
 * One evaluation seen through a subset of families (a tier's chart): per-family numbers of those families
 * only, and the overall rates recomputed as their mean (every family gets the same episodes).
 */
export function restrictFamilies(e: EvalPoint, families: readonly string[]): EvalPoint {
  const pick = (m: Record<string, number> | undefined) =>
    m ? Object.fromEntries(families.filter((f) => f in m).map((f) => [f, m[f]!])) : undefined;
  const perFamily = pick(e.perFamily)!;
  const sampledPerFamily = pick(e.sampledPerFamily);
  const episodesPerFamily = pick(e.episodesPerFamily);
  const n = Math.max(1, Object.keys(e.perFamily).length);
  const kept = Object.keys(perFamily).length;
  return {
    ...e,
    perFamily,
    successRate: mean(Object.values(perFamily)),
    episodes: Math.round((e.episodes * kept) / n),
    ...(sampledPerFamily
      ? {
          sampledPerFamily,
          sampledSuccessRate: mean(Object.values(sampledPerFamily)),
          ...(e.sampledEpisodes !== undefined ? { sampledEpisodes: Math.round((e.sampledEpisodes * kept) / n) } : {}),
        }
      : {}),
    ...(episodesPerFamily ? { episodesPerFamily } : {}),
  };
}

export interface FamilyOutcome {
  tier: Tier;
  goal: number;
  /** Greedy success at the BC start's evaluation (null without one). */
  bcStart: number | null;
  final: number | null;
  finalSampled: number | null;
  best: number;
  /** The first evaluation at or above the goal. */
  firstReached: { version: number; atMinutes: number; atEpisodes: number } | null;
  met: boolean;
}

export interface SuiteGoalReport {
  /** The first evaluation where every family met its goal within the window (null: never). */
  firstAllMet: { version: number; atMinutes: number; atEpisodes: number } | null;
  met: boolean;
  perFamily: Record<string, FamilyOutcome>;
  /** Families whose goal was met at the final evaluation, per tier. */
  finalMetCount: Record<Tier, { met: number; of: number }>;
}

/**
 * The goal report: per family (BC start, final, best, first time at its goal) and the whole suite (the first
 * evaluation where every family met its goal). Only evaluations within `windowMs` of the campaign start count.
 */
export function suiteGoalReport(
  evals: readonly EvalPoint[],
  goals: Record<string, { tier: Tier; goal: number }>,
  opts: { windowMs: number; bcStart?: EvalPoint; final?: EvalPoint | null }
): SuiteGoalReport {
  const inWindow = evals.filter((e) => e.atMs <= opts.windowMs);
  const at = (e: EvalPoint) => ({ version: e.version, atMinutes: e.atMs / 60_000, atEpisodes: e.atEpisodes });
  const final = opts.final ?? evals.at(-1) ?? null;
  const perFamily: Record<string, FamilyOutcome> = {};
  const finalMetCount: Record<Tier, { met: number; of: number }> = {
    tier1: { met: 0, of: 0 },
    tier2: { met: 0, of: 0 },
  };
  for (const [f, g] of Object.entries(goals)) {
    const reached = inWindow.find((e) => (e.perFamily[f] ?? -1) >= g.goal);
    const finalValue = final?.perFamily[f] ?? null;
    perFamily[f] = {
      tier: g.tier,
      goal: g.goal,
      bcStart: opts.bcStart?.perFamily[f] ?? null,
      final: finalValue,
      finalSampled: final?.sampledPerFamily?.[f] ?? null,
      best: Math.max(0, ...inWindow.map((e) => e.perFamily[f] ?? 0)),
      firstReached: reached ? at(reached) : null,
      met: reached !== undefined,
    };
    finalMetCount[g.tier].of++;
    if (finalValue !== null && finalValue >= g.goal) finalMetCount[g.tier].met++;
  }
  const all = inWindow.find((e) => meetsGoals(e, goals));
  return { firstAllMet: all ? at(all) : null, met: all !== undefined, perFamily, finalMetCount };
}
