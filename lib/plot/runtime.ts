/**
 * Observable Plot and the DOM it draws into, loaded on first use: Plot builds SVG elements with a
 * `document`, which in Node is jsdom's (Plot's documented server-side setup). Loading both takes about a
 * second, so modules that import lib/charts.ts but draw nothing (most of the viewer, the CLI) never pay it.
 * Plot is an ES module; tsx (and Node ≥ 20.19's require(esm)) load it synchronously, which keeps
 * lineChartSvg / barChartSvg synchronous.
 */
import type * as PlotModule from '@observablehq/plot';

export type PlotApi = typeof PlotModule;

/** The parts of jsdom's window dartflow uses (typed here: @types/jsdom is not a dependency). */
interface JsdomModule {
  JSDOM: new (html?: string) => { window: { document: PlotModule.PlotOptions['document'] } };
}

let plot: PlotApi | undefined;
let doc: PlotModule.PlotOptions['document'] | undefined;

export function plotApi(): PlotApi {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy and synchronous on purpose (see above)
  plot ??= require('@observablehq/plot') as PlotApi;
  return plot;
}

/** One jsdom document for every chart of the process: Plot only creates detached elements in it. */
export function plotDocument(): PlotModule.PlotOptions['document'] {
  if (!doc) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy and synchronous on purpose (see above)
    const { JSDOM } = require('jsdom') as JsdomModule;
    doc = new JSDOM('<!doctype html><html><body></body></html>').window.document;
  }
  return doc;
}

/** Plot.plot(...) as an SVG string (the <svg> element's outerHTML). */
export function plotToSvg(options: PlotModule.PlotOptions): string {
  const el = plotApi().plot({ ...options, document: plotDocument() }) as unknown as {
    outerHTML: string;
    tagName: string;
  };
  if (el.tagName.toLowerCase() !== 'svg')
    throw new Error(`Plot returned <${el.tagName}> instead of <svg> (a title, caption or legend option wraps it)`);
  return el.outerHTML;
}
