/**
 * Input checks for lib/charts.ts. A chart is drawn from benchmark JSON, MinIO records or live metrics; a
 * NaN, a point that is not an [x, y] pair or a mistyped value would otherwise be drawn as a silently wrong
 * picture (a line to the corner, a missing bar). Every error names the chart and the series or bar.
 */

/** A chart's input is unusable; the message names the chart and the series, bar or option at fault. */
export class ChartDataError extends Error {
  override name = 'ChartDataError';
}

const show = (v: unknown): string => {
  if (typeof v === 'number') return String(v); // JSON.stringify(NaN) would say null
  if (v === undefined) return 'undefined';
  try {
    const s = JSON.stringify(v);
    return s.length > 60 ? `${s.slice(0, 57)}...` : s;
  } catch {
    return String(v);
  }
};

const isFiniteNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export interface SeriesLike {
  name: string;
  points: Array<[number, number]>;
  color?: string;
}

/** Throws ChartDataError unless every series has a name and its points are pairs of finite numbers. */
export function checkSeries(chart: string, series: readonly SeriesLike[]): void {
  const fail = (msg: string): never => {
    throw new ChartDataError(`chart "${chart}": ${msg}`);
  };
  if (!Array.isArray(series)) fail(`series must be an array, got ${show(series)}`);
  series.forEach((s: SeriesLike | undefined, i) => {
    if (s === null || typeof s !== 'object') return fail(`series ${i} is ${show(s)}, not { name, points }`);
    if (typeof s.name !== 'string') return fail(`series ${i} has no name (got ${show(s.name)})`);
    const label = `series "${s.name}"`;
    if (s.color !== undefined && typeof s.color !== 'string') fail(`${label}: color ${show(s.color)} is not a string`);
    if (!Array.isArray(s.points)) return fail(`${label}: points must be an array of [x, y], got ${show(s.points)}`);
    s.points.forEach((p: unknown, j) => {
      if (!Array.isArray(p) || p.length !== 2)
        fail(`${label}: point ${j} is ${show(p)}; every point must be an [x, y] pair (mismatched lengths?)`);
      const [x, y] = p as unknown[];
      if (!isFiniteNumber(x)) fail(`${label}: point ${j} has x = ${show(x)}; x must be a finite number`);
      if (!isFiniteNumber(y)) fail(`${label}: point ${j} has y = ${show(y)}; y must be a finite number`);
    });
  });
}

/** Throws ChartDataError unless every bar has a string label and a finite value. */
export function checkBars(chart: string, bars: ReadonlyArray<{ label: string; value: number; color?: string }>): void {
  const fail = (msg: string): never => {
    throw new ChartDataError(`chart "${chart}": ${msg}`);
  };
  if (!Array.isArray(bars)) fail(`bars must be an array, got ${show(bars)}`);
  bars.forEach((b, i) => {
    if (b === null || typeof b !== 'object') return fail(`bar ${i} is ${show(b)}, not { label, value }`);
    if (typeof b.label !== 'string') return fail(`bar ${i} has no label (got ${show(b.label)})`);
    if (!isFiniteNumber(b.value)) fail(`bar "${b.label}" (index ${i}) has value ${show(b.value)}; it must be finite`);
    if (b.color !== undefined && typeof b.color !== 'string')
      fail(`bar "${b.label}" (index ${i}): color ${show(b.color)} is not a string`);
  });
}

/** Throws ChartDataError unless value is a finite number (for options such as yMin or a marker line). */
export function checkNumber(chart: string, what: string, value: unknown): void {
  if (!isFiniteNumber(value))
    throw new ChartDataError(`chart "${chart}": ${what} is ${show(value)}, not a finite number`);
}

/** Throws ChartDataError unless value is a whole number of pixels in [16, 10000]. */
export function checkSize(chart: string, what: string, value: number): void {
  if (!Number.isInteger(value) || value < 16 || value > 10_000)
    throw new ChartDataError(
      `chart "${chart}": ${what} is ${show(value)}; it must be a whole number of pixels, 16-10000`
    );
}
