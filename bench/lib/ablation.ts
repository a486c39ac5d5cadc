/**
 * The DART-style ablation's configurations and its statistics, as pure functions (no I/O): which switches
 * each cumulative configuration turns on (DART's ablation table, reference/dart-spec.md §5.3), and how the
 * held-out curves of several seeds are summarised (final success mean ± spread, episodes to a target).
 */
import type { CampaignConfigInput } from '../../schemas/config';

export interface AblationConfig {
  id: string;
  /** Column label (DART's table: Baseline, + Dynamic Rollout, …). */
  label: string;
  rollout: Partial<CampaignConfigInput['rollout']>;
  curation: Partial<CampaignConfigInput['curation']>;
  trainer: { useEntropySelection: boolean; useTis: boolean };
  /** Pre-collected successes per task seeded into the experience pool (§4.8), 0 = none. */
  precollectPerTask: number;
}

const OFF: AblationConfig = {
  id: 'grpo',
  label: 'GRPO baseline',
  rollout: { dynamicRollout: false, dynamicMaxSteps: false },
  curation: { experiencePool: false },
  trainer: { useEntropySelection: false, useTis: false },
  precollectPerTask: 0,
};

/** Cumulative, as in DART's table: each configuration adds one component to the previous one. */
export function ablationConfigs(precollectPerTask = 2): AblationConfig[] {
  const c1 = OFF;
  const c2: AblationConfig = {
    ...c1,
    id: 'dyn-rollout',
    label: '+ dynamic rollout number',
    rollout: { ...c1.rollout, dynamicRollout: true },
  };
  const c3: AblationConfig = {
    ...c2,
    id: 'dyn-length',
    label: '+ dynamic trajectory length',
    rollout: { ...c2.rollout, dynamicMaxSteps: true },
  };
  const c4: AblationConfig = {
    ...c3,
    id: 'entropy',
    label: '+ high-entropy steps',
    trainer: { ...c3.trainer, useEntropySelection: true },
  };
  const c5: AblationConfig = { ...c4, id: 'tis', label: '+ truncated IS', trainer: { ...c4.trainer, useTis: true } };
  const c6: AblationConfig = {
    ...c5,
    id: 'pool',
    label: '+ experience pool (all)',
    curation: { ...c5.curation, experiencePool: true },
    precollectPerTask,
  };
  return [c1, c2, c3, c4, c5, c6];
}

export interface Spread {
  mean: number;
  /** Sample standard deviation (0 for one value). */
  sd: number;
  min: number;
  max: number;
  n: number;
}

export function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { mean: NaN, sd: NaN, min: NaN, max: NaN, n: 0 };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sd = values.length > 1 ? Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1)) : 0;
  return { mean, sd, min: Math.min(...values), max: Math.max(...values), n: values.length };
}

export interface CurvePointLike {
  episodes: number;
  seconds: number;
  success: number;
  perTask: Record<string, number>;
  /** Temperature-1 success on the same held-out seeds (issue 14.6), when measured. */
  sampledSuccess?: number;
}

/**
 * RL episodes at the first evaluation whose success is ≥ target and stays ≥ target for `consecutive`
 * evaluations in a row (counted from that first one); null when not reached within the curve.
 */
export function episodesToTarget(
  curve: readonly Pick<CurvePointLike, 'episodes' | 'success'>[],
  target: number,
  consecutive = 1
): number | null {
  for (let i = 0; i + consecutive <= curve.length; i++) {
    if (curve.slice(i, i + consecutive).every((p) => p.success >= target)) return curve[i]!.episodes;
  }
  return null;
}

export interface AblationRunLike {
  configId: string;
  seed: number;
  curve: CurvePointLike[];
  episodes: number;
  seconds: number;
}

export interface ConfigSummary {
  configId: string;
  /** The start checkpoint's held-out success (the seed's BC warm start), overall and per family. */
  start: Spread;
  startPerFamily: Record<string, Spread>;
  /** Final held-out success, overall and per family, over seeds. */
  final: Spread;
  finalPerFamily: Record<string, Spread>;
  /** Final temperature-1 success over seeds (runs that measured it). */
  finalSampled: Spread;
  /** Gain over the seed's start checkpoint (final − first evaluation), over seeds. */
  gain: Spread;
  /** Episodes to the target per seed (null: not reached within the run's budget). */
  episodesToTarget: Array<number | null>;
  /** Mean over seeds of the best evaluation of each run. */
  best: Spread;
  seconds: Spread;
  /** Mean curve over seeds, evaluation by evaluation (x = mean episodes of that evaluation). */
  meanCurve: Array<{ episodes: number; success: number }>;
}

export function summarizeConfig(configId: string, runs: readonly AblationRunLike[], target: number): ConfigSummary {
  const mine = runs.filter((r) => r.configId === configId && r.curve.length > 0);
  const finals = mine.map((r) => r.curve.at(-1)!);
  const families = [...new Set(finals.flatMap((p) => Object.keys(p.perTask)))].sort();
  const len = Math.min(...mine.map((r) => r.curve.length));
  const meanCurve = mine.length
    ? Array.from({ length: len }, (_, i) => ({
        episodes: spread(mine.map((r) => r.curve[i]!.episodes)).mean,
        success: spread(mine.map((r) => r.curve[i]!.success)).mean,
      }))
    : [];
  return {
    configId,
    start: spread(mine.map((r) => r.curve[0]!.success)),
    startPerFamily: Object.fromEntries(families.map((f) => [f, spread(mine.map((r) => r.curve[0]!.perTask[f] ?? 0))])),
    final: spread(finals.map((p) => p.success)),
    finalSampled: spread(finals.flatMap((p) => (p.sampledSuccess === undefined ? [] : [p.sampledSuccess]))),
    finalPerFamily: Object.fromEntries(families.map((f) => [f, spread(finals.map((p) => p.perTask[f] ?? 0))])),
    gain: spread(mine.map((r) => r.curve.at(-1)!.success - r.curve[0]!.success)),
    episodesToTarget: mine.map((r) => episodesToTarget(r.curve, target)),
    best: spread(mine.map((r) => Math.max(...r.curve.map((p) => p.success)))),
    seconds: spread(mine.map((r) => r.seconds)),
    meanCurve,
  };
}

/** "0.62 ± 0.04" (mean ± sample sd) as percentages: "62 ± 4 %". */
export function formatPct(s: Spread): string {
  if (s.n === 0) return '—';
  return `${(s.mean * 100).toFixed(1)} ± ${(s.sd * 100).toFixed(1)}`;
}

/** Episodes-to-target cell: per-seed values, "—" for not reached, e.g. "768 / — / 1,024 (2 of 3)". */
export function formatEpisodesToTarget(values: ReadonlyArray<number | null>, budget: number): string {
  const reached = values.filter((v): v is number => v !== null);
  if (reached.length === 0) return `not reached within ${budget.toLocaleString('en-US')}`;
  return `${values.map((v) => (v === null ? '—' : v.toLocaleString('en-US'))).join(' / ')} (${reached.length} of ${values.length})`;
}

/** Two-sided 97.5 % quantiles of Student's t for df = 1…30 (beyond: the normal 1.96). */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

export function tQuantile975(df: number): number {
  if (!Number.isInteger(df) || df < 1) throw new Error(`tQuantile975: df must be an integer ≥ 1, got ${df}`);
  return df <= T975.length ? T975[df - 1]! : 1.96;
}

export interface Interval {
  mean: number;
  /** 95 % confidence interval of the mean (Student's t over the seeds); NaN with fewer than 2 values. */
  lo: number;
  hi: number;
  n: number;
}

/** The 95 % confidence interval of a spread's mean (its values independent, one per seed). */
export function intervalOf(s: Spread): Interval {
  if (s.n < 2) return { mean: s.mean, lo: NaN, hi: NaN, n: s.n };
  const half = (tQuantile975(s.n - 1) * s.sd) / Math.sqrt(s.n);
  return { mean: s.mean, lo: s.mean - half, hi: s.mean + half, n: s.n };
}

/** Mean and its 95 % confidence interval over independent values (one per seed). */
export const confidence95 = (values: readonly number[]): Interval => intervalOf(spread(values));

/** An effect is "real at this budget" when its 95 % interval excludes 0. */
export const excludesZero = (i: Interval): boolean => i.n >= 2 && (i.lo > 0 || i.hi < 0);

/**
 * Paired effect of configuration `b` over `a`: per seed, value(b's run) − value(a's run), over the seeds
 * that have both runs (the same BC start, so seed-to-seed differences cancel), with its 95 % interval.
 */
export function pairedEffect<R extends Pick<AblationRunLike, 'configId' | 'seed'>>(
  runs: readonly R[],
  a: string,
  b: string,
  value: (r: R) => number
): Interval & { perSeed: Array<{ seed: number; diff: number }> } {
  const perSeed: Array<{ seed: number; diff: number }> = [];
  for (const rb of runs.filter((r) => r.configId === b)) {
    const ra = runs.find((r) => r.configId === a && r.seed === rb.seed);
    if (ra) perSeed.push({ seed: rb.seed, diff: value(rb) - value(ra) });
  }
  return { ...confidence95(perSeed.map((p) => p.diff)), perSeed };
}

/** "+4.2 [−1.0, +9.4]" in percentage points; "real" marks an interval that excludes 0. */
export function formatEffect(i: Interval): string {
  const pp = (v: number) => `${v >= 0 ? '+' : '−'}${Math.abs(v * 100).toFixed(1)}`;
  if (i.n === 0) return '—';
  if (i.n < 2) return `${pp(i.mean)} (1 seed)`;
  return `${pp(i.mean)} [${pp(i.lo)}, ${pp(i.hi)}]${excludesZero(i) ? ' **real**' : ''}`;
}

/** Families whose start checkpoint's held-out success, averaged over seeds, is below `below` (near 0 %). */
export function lowStartFamilies(summary: Pick<ConfigSummary, 'startPerFamily'>, below = 0.1): string[] {
  return Object.entries(summary.startPerFamily)
    .filter(([, s]) => s.n > 0 && s.mean < below)
    .map(([f]) => f)
    .sort();
}
