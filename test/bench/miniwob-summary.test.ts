/**
 * The MiniWoB++ campaign benchmark's pure parts (bench/lib/miniwob-summary.ts, miniwob-published.ts,
 * miniwob-chart.ts): which evaluations are the BC start and "after RL", per-task rows and means, the
 * Markdown table, the chart's bars, the load and throughput statistics, and the published data's shape.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { groupedBarChartSvg } from '../../bench/lib/miniwob-chart';
import { MINIWOB_PUBLISHED, type PublishedSource } from '../../bench/lib/miniwob-published';
import {
  buildMiniwobCampaignSummary,
  chartBars,
  loadStats,
  modeSuccess,
  pickEvaluations,
  rlEpisodesPerMinute,
  summaryMarkdown,
} from '../../bench/lib/miniwob-summary';
import type { EvalPoint } from '../../schemas/campaign';
import { loadMiniwobSuite, miniwobPageOf } from '../../tasks/miniwob';

const A = 'miniwob.click-button';
const B = 'miniwob.enter-text';
const tasks = [
  { id: A, miniwobTask: 'click-button' },
  { id: B, miniwobTask: 'enter-text' },
];

function point(version: number, greedy: Record<string, number>, sampled?: Record<string, number>): EvalPoint {
  const fams = Object.keys(greedy);
  return {
    version,
    successRate: fams.reduce((a, f) => a + greedy[f]!, 0) / fams.length,
    episodes: 20 * fams.length,
    atEpisodes: version * 100,
    atMs: version * 60_000,
    perFamily: greedy,
    ...(sampled
      ? {
          sampledPerFamily: sampled,
          sampledSuccessRate: 0,
          sampledEpisodes: 20 * fams.length,
          episodesPerFamily: Object.fromEntries(fams.map((f) => [f, 20])),
        }
      : {}),
  };
}

const published: PublishedSource[] = [
  { key: 'P', agent: 'p', observation: 'html', source: 'a table', perTask: { 'click-button': 1, 'enter-text': 0.5 } },
  { key: 'Q', agent: 'q', observation: 'html', source: 'another', perTask: { 'click-button': 0.8 } },
];

test('pickEvaluations: v0 first, the BC start is the first newer version, after RL only when newer still', () => {
  const evals = [point(0, { [A]: 0 }), point(1, { [A]: 0.5 }), point(16, { [A]: 0.7 }), point(31, { [A]: 0.9 })];
  const p = pickEvaluations(evals, true);
  assert.equal(p.initial?.version, 0);
  assert.equal(p.bcStart?.version, 1);
  assert.equal(p.afterRl?.version, 31);
  // Without a warm start there is no BC start; "after RL" is then measured from v0.
  const q = pickEvaluations(evals, false);
  assert.equal(q.bcStart, null);
  assert.equal(q.afterRl?.version, 31);
  // A campaign stopped right after cloning has no "after RL" point (the last eval is the BC start).
  assert.equal(pickEvaluations(evals.slice(0, 2), true).afterRl, null);
  assert.deepEqual(pickEvaluations([], true), { initial: null, bcStart: null, afterRl: null });
});

test('modeSuccess: a family the evaluation did not cover is null, never 0', () => {
  const e = point(3, { [A]: 0 }, { [A]: 0.25 });
  assert.deepEqual(modeSuccess(e, A), { greedy: 0, sampled: 0.25, episodes: 20 });
  assert.deepEqual(modeSuccess(e, B), { greedy: null, sampled: null, episodes: null });
  assert.deepEqual(modeSuccess(point(3, { [A]: 0.5 }), A), { greedy: 0.5, sampled: null, episodes: null });
  assert.deepEqual(modeSuccess(null, A), { greedy: null, sampled: null, episodes: null });
});

test('summary rows: random, BC start, after RL, lift in points, published per source, means', () => {
  const evals = [
    point(0, { [A]: 0.05, [B]: 0 }, { [A]: 0.1, [B]: 0 }),
    point(1, { [A]: 0.6, [B]: 0.2 }, { [A]: 0.4, [B]: 0.1 }),
    point(20, { [A]: 0.95, [B]: 0.15 }, { [A]: 0.9, [B]: 0.3 }),
  ];
  const s = buildMiniwobCampaignSummary({
    tasks,
    evals,
    bcWarmStart: true,
    random: { 'click-button': 0.2 },
    published,
  });
  assert.deepEqual(s.versions, { initial: 0, bcStart: 1, afterRl: 20 });
  const [a, b] = s.rows;
  assert.equal(a!.random, 0.2);
  assert.equal(b!.random, null);
  assert.equal(a!.initial.greedy, 0.05);
  assert.equal(a!.bcStart.greedy, 0.6);
  assert.equal(a!.afterRl.sampled, 0.9);
  assert.deepEqual(a!.rlLiftPoints, { greedy: 35, sampled: 50 });
  assert.deepEqual(b!.rlLiftPoints, { greedy: -5, sampled: 20 });
  assert.deepEqual(a!.published, { P: 1, Q: 0.8 });
  assert.deepEqual(b!.published, { P: 0.5, Q: null });
  assert.equal(s.means.random, 0.2); // only the task that has one
  assert.ok(Math.abs(s.means.bcGreedy! - 0.4) < 1e-12);
  assert.ok(Math.abs(s.means.rlGreedy! - 0.55) < 1e-12);
  assert.deepEqual(s.means.published, { P: 0.75, Q: 0.8 });
  assert.deepEqual(s.tasksAtLeast, { threshold: 0.9, afterRl: ['click-button'], bcStart: [] });
});

test('the Markdown table has one row per task plus the mean, with "–" for missing numbers', () => {
  const s = buildMiniwobCampaignSummary({
    tasks,
    evals: [point(0, { [A]: 0, [B]: 0 }), point(1, { [A]: 0.5, [B]: 0.25 }), point(6, { [A]: 1, [B]: 0.5 })],
    bcWarmStart: true,
    published,
  });
  const md = summaryMarkdown(s, published).split('\n');
  assert.equal(md.length, 2 + tasks.length + 1);
  assert.match(md[0]!, /BC start greedy \(v1\).*after RL greedy \(v6\).*P \(published\).*Q \(published\)/);
  assert.equal(md[2], '| click-button | – | 50 % | – | 100 % | – | +50 | 100 % | 80 % |');
  assert.equal(md[3], '| enter-text | – | 25 % | – | 50 % | – | +25 | 50 % | – |');
  assert.match(md[4]!, /^\| \*\*mean\*\* \| – \| 38 % \| – \| 75 % \| – \| \+38 \| 75 % \| 80 % \|$/);
});

test('chart bars: per task in table order, missing numbers left out; the SVG draws one rect per bar', () => {
  const s = buildMiniwobCampaignSummary({
    tasks,
    evals: [point(0, { [A]: 0, [B]: 0 }), point(1, { [A]: 0.5, [B]: 0.25 }, { [A]: 0.4, [B]: 0.2 })],
    bcWarmStart: true,
    random: { 'click-button': 0.2, 'enter-text': 0 },
    published,
  });
  const bars = chartBars(s, published);
  // No "after RL" evaluation: those bars are absent, not zero.
  assert.deepEqual(
    bars.filter((b) => b.group === 'enter-text').map((b) => [b.series, b.value]),
    [
      ['random policy', 0],
      ['BC start (greedy)', 0.25],
      ['P (published)', 0.5],
    ]
  );
  assert.equal(bars.filter((b) => b.group === 'click-button').length, 4);
  const svg = groupedBarChartSvg(bars, { title: 't', yLabel: 'success' });
  assert.match(svg, /^<svg/);
  assert.equal(svg.match(/<rect/g)?.length, bars.length);
  // The legend lists every series.
  for (const series of new Set(bars.map((b) => b.series))) assert.ok(svg.includes(`>${series}<`), series);
  assert.throws(() => groupedBarChartSvg([{ group: 'x', series: 'y', value: NaN }], { title: 't', yLabel: 'y' }));
});

test('load average statistics and steady-state RL episodes per minute', () => {
  assert.equal(loadStats([]), null);
  assert.deepEqual(loadStats([{ load1: 2 }, { load1: 4 }, { load1: 6.5 }]), {
    min: 2,
    mean: 4.17,
    max: 6.5,
    samples: 3,
  });
  const samples = [
    { atSeconds: 15, episodes: 0, phase: 'warm-start' },
    { atSeconds: 120, episodes: 10, phase: 'running' },
    { atSeconds: 240, episodes: 310, phase: 'running' },
    { atSeconds: 300, episodes: 400, phase: 'running' },
    { atSeconds: 330, episodes: 420, phase: 'draining' },
  ];
  assert.deepEqual(rlEpisodesPerMinute(samples), {
    episodesPerMinute: 130,
    fromSeconds: 120,
    toSeconds: 300,
    episodes: 390,
  });
  assert.equal(rlEpisodesPerMinute(samples.slice(0, 2)), null);
});

test('published data: every source covers the 11 easy tasks with rates in [0, 1] and names its table', () => {
  const easy = loadMiniwobSuite('miniwob-easy').taskSpecs.map((t) => miniwobPageOf(t)!.task);
  assert.equal(easy.length, 11);
  assert.ok(MINIWOB_PUBLISHED.length >= 1);
  for (const p of MINIWOB_PUBLISHED) {
    assert.deepEqual(Object.keys(p.perTask).sort(), [...easy].sort(), p.key);
    for (const v of Object.values(p.perTask)) assert.ok(v >= 0 && v <= 1, `${p.key}: ${v}`);
    assert.match(p.source, /Table \d+/);
    assert.match(p.source, /arXiv:\d{4}\.\d{5}/);
  }
});
