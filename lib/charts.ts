/**
 * Charts for learning curves, benchmarks and the viewer, drawn with Observable Plot (docs/charts.md says
 * why Plot). lineChartSvg / barChartSvg return a self-contained SVG string (synchronous; inline it in a
 * page, or write it to a file); writeSvgAsPng renders one to PNG in the headless Chromium the env uses.
 * Inputs are checked: a NaN or a point that is not an [x, y] pair throws a ChartDataError naming the chart
 * and the series.
 */
import type * as PlotModule from '@observablehq/plot';
import { renderSvgsToPng, type SvgPngJob } from './plot/png';
import { plotApi, plotDocument, plotToSvg } from './plot/runtime';
import { ChartDataError, checkBars, checkNumber, checkSeries, checkSize } from './plot/validate';

export { ChartDataError } from './plot/validate';
export type { SvgPngJob } from './plot/png';

export interface Series {
  name: string;
  points: Array<[number, number]>;
  color?: string;
}

export interface LineChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  yMin?: number;
  yMax?: number;
  /** x range; by default from min(0, data) to max(data), made nice. */
  xMin?: number;
  xMax?: number;
  /** Horizontal reference lines, e.g. the 90% target. */
  hLines?: Array<{ y: number; label: string }>;
  /** Vertical marker lines, e.g. { x: 150, label: 'RL starts' } after a BC warm start. */
  vLines?: Array<{ x: number; label: string; color?: string }>;
  /** Dots on the data points: 'auto' (default) draws them for series of at most 100 points. */
  dots?: boolean | 'auto';
}

export interface BarChartOptions {
  title: string;
  yLabel: string;
  width?: number;
  height?: number;
}

/** Colours given to series and bars without their own (matplotlib's tab10, as the old renderer had). */
export const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

const FONT_PX = 12;
const TITLE_PX = 15;
/** Rough text widths (sans-serif), for margins only; Plot places the text itself. */
const textPx = (s: string, px = FONT_PX) => s.length * px * 0.6;
// An object: Plot applies a style string through a property jsdom ignores.
const STYLE = {
  background: 'white',
  color: '#222',
  fontFamily: 'sans-serif',
  fontSize: `${FONT_PX}px`,
  overflow: 'visible',
};

/**
 * Loads Plot and jsdom now (about a second) instead of on the first chart: for a server such as the
 * viewer, so its first page with a chart is as fast as the later ones.
 */
export function preloadCharts(): void {
  plotApi();
  plotDocument();
}

/** Builds the columnar form some callers have (xs[i], ys[i]) into a Series, checking the lengths match. */
export function seriesFromColumns(name: string, xs: readonly number[], ys: readonly number[], color?: string): Series {
  if (xs.length !== ys.length)
    throw new ChartDataError(`series "${name}": ${xs.length} x values but ${ys.length} y values (mismatched lengths)`);
  return { name, points: xs.map((x, i) => [x, ys[i]!]), ...(color ? { color } : {}) };
}

/** The title as a Plot text mark in the top margin: over the plot area, or from the left edge when longer. */
function titleMark(P: typeof PlotModule, title: string, frameWidth: number, marginLeft: number): PlotModule.Markish {
  const fits = textPx(title, TITLE_PX) * 1.05 <= frameWidth;
  return P.text([title], {
    frameAnchor: fits ? 'top' : 'top-left',
    textAnchor: fits ? 'middle' : 'start',
    lineAnchor: 'bottom',
    dx: fits ? 0 : 12 - marginLeft,
    dy: -14,
    fontSize: TITLE_PX,
    fontWeight: 'bold',
  });
}

export function lineChartSvg(series: Series[], o: LineChartOptions): string {
  const chart = o.title;
  checkSeries(chart, series);
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  checkSize(chart, 'width', W);
  checkSize(chart, 'height', H);
  for (const k of ['yMin', 'yMax', 'xMin', 'xMax'] as const) if (o[k] !== undefined) checkNumber(chart, k, o[k]);
  (o.hLines ?? []).forEach((h, i) => checkNumber(chart, `hLines[${i}] ("${h.label}") y`, h.y));
  (o.vLines ?? []).forEach((v, i) => checkNumber(chart, `vLines[${i}] ("${v.label}") x`, v.x));

  const P = plotApi();
  const all = series.flatMap((s) => s.points);
  const xs = [...all.map((p) => p[0]), ...(o.vLines ?? []).map((v) => v.x)];
  const ys = all.map((p) => p[1]);
  const xMin = o.xMin ?? Math.min(0, ...xs);
  const xRight = Math.max(xMin, ...xs);
  const xMax = o.xMax ?? (xRight > xMin ? xRight : xMin + 1); // no data (or all at one x): a unit range
  const yMin = o.yMin ?? Math.min(0, ...ys);
  // Reference lines count towards an automatic top (they are drawn inside the plot area); 5 % headroom.
  const yTop = Math.max(yMin, ...ys, ...(o.hLines ?? []).map((h) => h.y));
  const yMax = o.yMax ?? (yTop > yMin ? yTop + (yTop - yMin) * 0.05 : yMin + 1);
  if (!(xMax > xMin)) throw new ChartDataError(`chart "${chart}": xMin ${xMin} is not below xMax ${xMax}`);
  if (!(yMax > yMin)) throw new ChartDataError(`chart "${chart}": yMin ${yMin} is not below yMax ${yMax}`);

  // The legend column at the right grows with the longest series name (as the old renderer's did).
  const legendW = Math.max(160, 44 + textPx(series.reduce((m, s) => (s.name.length > m.length ? s.name : m), '')));
  const margin = { left: 72, right: Math.min(legendW, W / 2), top: 40, bottom: 52 };
  const frameW = W - margin.left - margin.right;
  const color = (s: Series, i: number) => s.color ?? PALETTE[i % PALETTE.length]!;
  const dots = (s: Series) => (o.dots === 'auto' || o.dots === undefined ? s.points.length <= 100 : o.dots);
  const xy = { x: (p: [number, number]) => p[0], y: (p: [number, number]) => p[1] };
  // Tick counts as the old renderer had (about 5 on the y axis); whole-number x data gets whole-number ticks.
  const frameH = H - margin.top - margin.bottom;
  const yTicks = Math.max(3, Math.round(frameH / 64));
  const xTicks = Math.max(3, Math.round(frameW / 90));
  const integerTicks =
    xs.length > 0 && xs.every(Number.isInteger) && xMax - xMin <= xTicks
      ? Array.from({ length: Math.floor(xMax) - Math.ceil(xMin) + 1 }, (_, k) => Math.ceil(xMin) + k)
      : undefined;

  const marks: PlotModule.Markish[] = [
    P.frame({ anchor: 'bottom', stroke: '#333' }),
    P.frame({ anchor: 'left', stroke: '#333' }),
    P.ruleY(o.hLines ?? [], { y: 'y', stroke: '#999', strokeDasharray: '5 4', clip: 'frame' }),
    P.text(o.hLines ?? [], {
      y: 'y',
      text: 'label',
      frameAnchor: 'right',
      textAnchor: 'end',
      lineAnchor: 'bottom',
      dx: -4,
      dy: -3,
      fill: '#666',
      clip: 'frame',
    }),
    P.ruleX(o.vLines ?? [], {
      x: 'x',
      stroke: (v: { color?: string }) => v.color ?? '#555',
      strokeDasharray: '3 3',
      clip: 'frame',
    }),
    P.text(o.vLines ?? [], {
      x: 'x',
      text: 'label',
      frameAnchor: 'top',
      textAnchor: 'start',
      lineAnchor: 'top',
      dx: 4,
      dy: 4,
      fill: (v: { color?: string }) => v.color ?? '#444',
      clip: 'frame',
    }),
    ...series.flatMap((s, i) => [
      P.line(s.points, { ...xy, stroke: color(s, i), strokeWidth: 2 }),
      ...(dots(s) ? [P.dot(s.points, { ...xy, fill: color(s, i), r: 2.5 })] : []),
    ]),
    // Legend: a swatch and the name per series, in the right margin.
    ...series.flatMap((s, i) => [
      P.dot([s.name], { frameAnchor: 'top-right', dx: 18, dy: 9 + i * 20, symbol: 'square', r: 5, fill: color(s, i) }),
      P.text([s.name], {
        frameAnchor: 'top-right',
        dx: 30,
        dy: 6 + i * 20,
        textAnchor: 'start',
        text: (d: string) => d,
      }),
    ]),
    titleMark(P, o.title, frameW, margin.left),
  ];
  return plotToSvg({
    width: W,
    height: H,
    marginLeft: margin.left,
    marginRight: margin.right,
    marginTop: margin.top,
    marginBottom: margin.bottom,
    style: STYLE,
    // Series colours are literal CSS colours (identity), so no colour scale or legend of Plot's own.
    color: { type: 'identity' },
    x: {
      type: 'linear',
      domain: [xMin, xMax],
      nice: o.xMin === undefined && o.xMax === undefined,
      ticks: integerTicks ?? xTicks,
      ...(integerTicks ? { tickFormat: 'd' } : {}),
      label: o.xLabel,
      labelAnchor: 'center',
      labelArrow: 'none',
      labelOffset: 36,
    },
    y: {
      type: 'linear',
      domain: [yMin, yMax],
      nice: o.yMin === undefined && o.yMax === undefined,
      ticks: yTicks,
      grid: true,
      label: o.yLabel,
      labelAnchor: 'center',
      labelArrow: 'none',
      labelOffset: 56,
    },
    marks,
  });
}

export function barChartSvg(bars: Array<{ label: string; value: number; color?: string }>, o: BarChartOptions): string {
  const chart = o.title;
  checkBars(chart, bars);
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  checkSize(chart, 'width', W);
  checkSize(chart, 'height', H);

  const P = plotApi();
  const rows = bars.map((b, i) => ({
    i,
    label: b.label,
    value: b.value,
    color: b.color ?? PALETTE[i % PALETTE.length]!,
  }));
  const values = rows.map((r) => r.value);
  const yMin = Math.min(0, ...values) * 1.15;
  const yMax = Math.max(1e-9, ...values) * 1.15;
  const margin = { left: 72, right: 24, top: 40 };
  // Tick labels wrap to the bar's slot; the bottom margin grows with the number of lines (at most 4).
  const slotPx = (W - margin.left - margin.right) / Math.max(1, rows.length);
  const lineWidthEm = Math.max(3, (slotPx * 0.95) / FONT_PX);
  const lines = Math.min(4, Math.max(1, ...rows.map((r) => Math.ceil(textPx(r.label) / (slotPx * 0.95)))));
  const marginBottom = 28 + lines * 15;
  const fmt = (v: number) => String(Number(v.toPrecision(3)));

  return plotToSvg({
    width: W,
    height: H,
    marginLeft: margin.left,
    marginRight: margin.right,
    marginTop: margin.top,
    marginBottom,
    style: STYLE,
    color: { type: 'identity' },
    // Bars are placed by index, so two bars with the same label stay two bars.
    x: { type: 'band', domain: rows.map((r) => r.i), padding: 0.3, label: null },
    y: {
      type: 'linear',
      domain: [yMin, yMax],
      ticks: Math.max(3, Math.round((H - margin.top - marginBottom) / 64)),
      grid: true,
      label: o.yLabel,
      labelAnchor: 'center',
      labelArrow: 'none',
      labelOffset: 56,
    },
    marks: [
      P.axisX({
        tickSize: 0,
        tickPadding: 6,
        lineWidth: lineWidthEm,
        tickFormat: (i: number) => rows[i]?.label ?? '',
        fontSize: FONT_PX,
      }),
      P.barY(rows, { x: 'i', y: 'value', fill: 'color' }),
      P.text(rows, {
        x: 'i',
        y: 'value',
        text: (r: { value: number }) => fmt(r.value),
        lineAnchor: 'bottom',
        dy: -4,
      }),
      P.ruleY([0], { stroke: '#333' }),
      titleMark(P, o.title, W - margin.left - margin.right, margin.left),
    ],
  });
}

/** Renders an SVG chart to a PNG file of the SVG's size, with headless Chromium (CHROMIUM_PATH or /usr/bin/chromium). */
export async function writeSvgAsPng(
  svg: string,
  outFile: string,
  chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
): Promise<void> {
  await renderSvgsToPng([{ svg, file: outFile }], chromiumPath);
}

/** Like writeSvgAsPng for many charts, starting Chromium once (re-plotting a folder of benchmarks). */
export async function writeSvgsAsPng(
  jobs: readonly SvgPngJob[],
  chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
): Promise<void> {
  await renderSvgsToPng(jobs, chromiumPath);
}
