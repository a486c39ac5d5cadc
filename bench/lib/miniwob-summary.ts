/**
 * The MiniWoB++ campaign benchmark's pure part: from a campaign's evaluations (held-out, greedy and
 * temperature 1, per task family), the random-policy baseline and the published numbers, the per-task table
 * that docs/bench/miniwob.json, the chart and docs/miniwob.md show. No I/O, so test/bench/miniwob-summary.test.ts
 * checks it on hand-made evaluations.
 */
import type { EvalPoint } from '../../schemas/campaign';
import type { PublishedSource } from './miniwob-published';

export interface MiniwobTaskRef {
  /** dartflow task id = family, e.g. `miniwob.click-button`. */
  id: string;
  /** MiniWoB page name, e.g. `click-button` (the key of the published tables). */
  miniwobTask: string;
}

/** Greedy and temperature-1 success of one task in one evaluation (null: the task was not evaluated). */
export interface ModeSuccess {
  greedy: number | null;
  sampled: number | null;
  /** Greedy episodes of this task in the evaluation (the same seeds ran at temperature 1). */
  episodes: number | null;
}

export interface MiniwobCampaignRow {
  id: string;
  miniwobTask: string;
  /** Uniform-random policy (bench/miniwob.ts's random section); null when that section is missing. */
  random: number | null;
  /** The untrained initial policy (v0), evaluated while the demonstrations ran. */
  initial: ModeSuccess;
  /** After behaviour cloning on oracle demos: the RL start. */
  bcStart: ModeSuccess;
  /** The campaign's last evaluation (the final one after the stop). */
  afterRl: ModeSuccess;
  /** afterRl − bcStart, in percentage points (null when either is missing). */
  rlLiftPoints: { greedy: number | null; sampled: number | null };
  /** Published success per source key (null: the source has no number for this task). */
  published: Record<string, number | null>;
}

export interface MiniwobCampaignSummary {
  rows: MiniwobCampaignRow[];
  /** Unweighted means over the tasks that have the number (tasks counted in `n`). */
  means: {
    random: number | null;
    initialGreedy: number | null;
    bcGreedy: number | null;
    bcSampled: number | null;
    rlGreedy: number | null;
    rlSampled: number | null;
    published: Record<string, number | null>;
  };
  /** Versions of the three evaluations used (null when missing). */
  versions: { initial: number | null; bcStart: number | null; afterRl: number | null };
  /** Tasks whose greedy success after RL is ≥ the threshold (default 0.9), and how many there are. */
  tasksAtLeast: { threshold: number; afterRl: string[]; bcStart: string[] };
}

const NONE: ModeSuccess = { greedy: null, sampled: null, episodes: null };

/** A task's numbers in one evaluation. A family missing from perFamily is "not evaluated", never 0. */
export function modeSuccess(e: EvalPoint | null | undefined, family: string): ModeSuccess {
  if (!e || !(family in e.perFamily)) return NONE;
  return {
    greedy: e.perFamily[family]!,
    sampled: e.sampledPerFamily && family in e.sampledPerFamily ? e.sampledPerFamily[family]! : null,
    episodes: e.episodesPerFamily?.[family] ?? null,
  };
}

/**
 * The three evaluations the table compares, from a campaign's evaluations in order: the first one (v0, the
 * untrained policy), the RL start (with a BC warm start: the first evaluation of a newer version than the
 * first, i.e. the cloned model; without one there is none) and the last one (after RL). The last is only
 * "after RL" when it is newer than the BC start.
 */
export function pickEvaluations(
  evals: readonly EvalPoint[],
  bcWarmStart: boolean
): { initial: EvalPoint | null; bcStart: EvalPoint | null; afterRl: EvalPoint | null } {
  const initial = evals[0] ?? null;
  const bcStart = bcWarmStart && initial ? (evals.find((e) => e.version > initial.version) ?? null) : null;
  const start = bcStart ?? initial;
  const last = evals.at(-1) ?? null;
  const afterRl = last && start && last.version > start.version ? last : null;
  return { initial, bcStart, afterRl };
}

const diffPoints = (a: number | null, b: number | null): number | null =>
  a === null || b === null ? null : Math.round((a - b) * 1000) / 10;

function meanOf(xs: ReadonlyArray<number | null>): number | null {
  const v = xs.filter((x): x is number => x !== null);
  return v.length === 0 ? null : v.reduce((a, b) => a + b, 0) / v.length;
}

export function buildMiniwobCampaignSummary(input: {
  tasks: readonly MiniwobTaskRef[];
  evals: readonly EvalPoint[];
  bcWarmStart: boolean;
  /** Random-policy success per MiniWoB page name. */
  random?: Readonly<Record<string, number>>;
  published: readonly PublishedSource[];
  threshold?: number;
}): MiniwobCampaignSummary {
  const threshold = input.threshold ?? 0.9;
  const { initial, bcStart, afterRl } = pickEvaluations(input.evals, input.bcWarmStart);
  const rows: MiniwobCampaignRow[] = input.tasks.map((t) => {
    const bc = modeSuccess(bcStart, t.id);
    const rl = modeSuccess(afterRl, t.id);
    return {
      id: t.id,
      miniwobTask: t.miniwobTask,
      random: input.random?.[t.miniwobTask] ?? null,
      initial: modeSuccess(initial, t.id),
      bcStart: bc,
      afterRl: rl,
      rlLiftPoints: { greedy: diffPoints(rl.greedy, bc.greedy), sampled: diffPoints(rl.sampled, bc.sampled) },
      published: Object.fromEntries(input.published.map((p) => [p.key, p.perTask[t.miniwobTask] ?? null])),
    };
  });
  const at = (pick: (r: MiniwobCampaignRow) => number | null) =>
    rows.filter((r) => (pick(r) ?? -1) >= threshold).map((r) => r.miniwobTask);
  return {
    rows,
    means: {
      random: meanOf(rows.map((r) => r.random)),
      initialGreedy: meanOf(rows.map((r) => r.initial.greedy)),
      bcGreedy: meanOf(rows.map((r) => r.bcStart.greedy)),
      bcSampled: meanOf(rows.map((r) => r.bcStart.sampled)),
      rlGreedy: meanOf(rows.map((r) => r.afterRl.greedy)),
      rlSampled: meanOf(rows.map((r) => r.afterRl.sampled)),
      published: Object.fromEntries(input.published.map((p) => [p.key, meanOf(rows.map((r) => r.published[p.key]!))])),
    },
    versions: {
      initial: initial?.version ?? null,
      bcStart: bcStart?.version ?? null,
      afterRl: afterRl?.version ?? null,
    },
    tasksAtLeast: { threshold, afterRl: at((r) => r.afterRl.greedy), bcStart: at((r) => r.bcStart.greedy) },
  };
}

/** 0.8125 → "81 %", null → "–". */
export const pctCell = (v: number | null): string => (v === null ? '–' : `${Math.round(v * 100)} %`);
const signedCell = (v: number | null): string => (v === null ? '–' : `${v > 0 ? '+' : ''}${Math.round(v)}`);

/** The per-task Markdown table docs/miniwob.md and docs/benchmarks.md show (and the bench prints). */
export function summaryMarkdown(s: MiniwobCampaignSummary, published: readonly PublishedSource[]): string {
  const head = [
    'task',
    'random',
    `BC start greedy (v${s.versions.bcStart ?? '?'})`,
    'BC start T=1',
    `after RL greedy (v${s.versions.afterRl ?? '?'})`,
    'after RL T=1',
    'RL lift greedy (points)',
    ...published.map((p) => `${p.key} (published)`),
  ];
  const lines = [`| ${head.join(' | ')} |`, `| ${head.map((h, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`];
  for (const r of s.rows)
    lines.push(
      `| ${[
        r.miniwobTask,
        pctCell(r.random),
        pctCell(r.bcStart.greedy),
        pctCell(r.bcStart.sampled),
        pctCell(r.afterRl.greedy),
        pctCell(r.afterRl.sampled),
        signedCell(r.rlLiftPoints.greedy),
        ...published.map((p) => pctCell(r.published[p.key] ?? null)),
      ].join(' | ')} |`
    );
  const m = s.means;
  const lift = m.rlGreedy !== null && m.bcGreedy !== null ? (m.rlGreedy - m.bcGreedy) * 100 : null;
  lines.push(
    `| ${[
      '**mean**',
      pctCell(m.random),
      pctCell(m.bcGreedy),
      pctCell(m.bcSampled),
      pctCell(m.rlGreedy),
      pctCell(m.rlSampled),
      signedCell(lift),
      ...published.map((p) => pctCell(m.published[p.key] ?? null)),
    ].join(' | ')} |`
  );
  return lines.join('\n');
}

/** One bar of the grouped chart: task group, series name, value (rows with a null value are left out). */
export interface GroupedBar {
  group: string;
  series: string;
  value: number;
}

/** The chart's bars, per task in table order: random, BC start, after RL (greedy, T=1), then each source. */
export function chartBars(s: MiniwobCampaignSummary, published: readonly PublishedSource[]): GroupedBar[] {
  const bars: GroupedBar[] = [];
  for (const r of s.rows) {
    const push = (series: string, value: number | null) => {
      if (value !== null) bars.push({ group: r.miniwobTask, series, value });
    };
    push('random policy', r.random);
    push('BC start (greedy)', r.bcStart.greedy);
    push('after RL (greedy)', r.afterRl.greedy);
    push('after RL (T=1)', r.afterRl.sampled);
    for (const p of published) push(`${p.key} (published)`, r.published[p.key] ?? null);
  }
  return bars;
}

/** min / mean / max of the 1-minute load averages sampled during a run (null without samples). */
export function loadStats(
  samples: ReadonlyArray<{ load1: number }>
): { min: number; mean: number; max: number; samples: number } | null {
  if (samples.length === 0) return null;
  const xs = samples.map((s) => s.load1);
  const r = (v: number) => Math.round(v * 100) / 100;
  return {
    min: r(Math.min(...xs)),
    mean: r(xs.reduce((a, b) => a + b, 0) / xs.length),
    max: r(Math.max(...xs)),
    samples: xs.length,
  };
}

/**
 * RL rollout episodes per minute in the running phase (after the BC warm start, before the drain): from the
 * first to the last status sample taken while the phase was `running`. Null with fewer than two such samples.
 */
export function rlEpisodesPerMinute(
  samples: ReadonlyArray<{ atSeconds: number; episodes: number; phase: string }>
): { episodesPerMinute: number; fromSeconds: number; toSeconds: number; episodes: number } | null {
  const running = samples.filter((s) => s.phase === 'running');
  const first = running[0];
  const last = running.at(-1);
  if (!first || !last || last.atSeconds <= first.atSeconds) return null;
  const episodes = last.episodes - first.episodes;
  return {
    episodesPerMinute: Math.round((episodes * 60 * 10) / (last.atSeconds - first.atSeconds)) / 10,
    fromSeconds: Math.round(first.atSeconds),
    toSeconds: Math.round(last.atSeconds),
    episodes,
  };
}
