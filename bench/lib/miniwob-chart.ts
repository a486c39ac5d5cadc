/**
 * Grouped bar chart for the MiniWoB++ campaign benchmark (Observable Plot, like lib/charts.ts): one group
 * per task, one bar per series (random policy, BC start, after RL greedy and T=1, published numbers), a
 * legend drawn as marks in the top margin (lib/plot/runtime refuses Plot's own legend, which wraps the SVG).
 */
import { PALETTE } from '../../lib/charts';
import { plotApi, plotToSvg } from '../../lib/plot/runtime';
import type { GroupedBar } from './miniwob-summary';

/** Measured series first (saturated colours), published ones in greys. */
const SERIES_COLORS: Record<string, string> = {
  'random policy': '#bbbbbb',
  'BC start (greedy)': PALETTE[0]!,
  'after RL (greedy)': PALETTE[1]!,
  'after RL (T=1)': PALETTE[3]!,
};
const PUBLISHED_GREYS = ['#2b2b2b', '#5a5a5a', '#8a8a8a', '#444444'];

export function groupedBarChartSvg(
  bars: readonly GroupedBar[],
  o: { title: string; yLabel: string; width?: number; height?: number }
): string {
  const groups = [...new Set(bars.map((b) => b.group))];
  const series = [...new Set(bars.map((b) => b.series))];
  for (const b of bars)
    if (!Number.isFinite(b.value)) throw new Error(`chart "${o.title}": bar ${b.group}/${b.series} is ${b.value}`);
  let grey = 0;
  const colorOf = Object.fromEntries(
    series.map((s) => [s, SERIES_COLORS[s] ?? PUBLISHED_GREYS[grey++ % PUBLISHED_GREYS.length]!])
  );
  const W = o.width ?? 1800;
  const H = o.height ?? 520;
  const slot = 0.84 / Math.max(1, series.length);
  const rows = bars.map((b) => {
    const g = groups.indexOf(b.group);
    const j = series.indexOf(b.series);
    const x1 = g - 0.42 + j * slot;
    return { ...b, x1, x2: x1 + slot * 0.9, fill: colorOf[b.series]! };
  });
  const P = plotApi();
  // Legend: one swatch + label per series along the top, in data coordinates above y = 1.
  const perRow = Math.ceil(series.length / 2);
  const legendStep = groups.length / perRow;
  const legend = series.map((s, i) => ({
    x: -0.45 + (i % perRow) * legendStep,
    y: i < perRow ? 1.22 : 1.13,
    label: s,
    fill: colorOf[s]!,
  }));
  return plotToSvg({
    width: W,
    height: H,
    marginLeft: 72,
    marginRight: 24,
    marginTop: 40,
    marginBottom: 48,
    style: { background: 'white', color: '#222', fontFamily: 'sans-serif', fontSize: '12px', overflow: 'visible' },
    x: { type: 'linear', domain: [-0.5, groups.length - 0.5], axis: null },
    y: {
      type: 'linear',
      domain: [0, 1.28],
      ticks: [0, 0.2, 0.4, 0.6, 0.8, 1],
      grid: true,
      label: o.yLabel,
      labelAnchor: 'center',
      labelArrow: 'none',
      labelOffset: 56,
    },
    marks: [
      P.rectY(rows, { x1: 'x1', x2: 'x2', y1: 0, y2: 'value', fill: 'fill' }),
      P.ruleY([0], { stroke: '#333' }),
      P.ruleY([0.9], { stroke: '#999', strokeDasharray: '4,3' }),
      P.text(
        groups.map((g, i) => ({ g, i })),
        { x: 'i', y: 0, text: 'g', dy: 16, fontSize: 12 }
      ),
      P.dot(legend, { x: 'x', y: 'y', fill: 'fill', symbol: 'square', r: 6 }),
      P.text(legend, { x: 'x', y: 'y', text: 'label', dx: 11, textAnchor: 'start', fontSize: 12 }),
      P.text([o.title], {
        frameAnchor: 'top-left',
        textAnchor: 'start',
        lineAnchor: 'bottom',
        dx: -60,
        dy: -14,
        fontSize: 15,
        fontWeight: 'bold',
      }),
    ],
  });
}
