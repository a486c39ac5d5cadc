/**
 * SVG → PNG in the headless Chromium the browser env uses (BrowserHost: CHROMIUM_ARGS, network locked
 * down; a chart needs nothing from outside). No native canvas module to build: .npmrc has ignore-scripts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { BrowserHost } from '../../envs/browser/host';

export interface SvgPngJob {
  svg: string;
  file: string;
}

/** width/height of the first <svg> element (the chart's size in CSS pixels). */
export function svgSize(svg: string): { width: number; height: number } {
  const tag = /<svg\b[^>]*>/i.exec(svg)?.[0];
  if (!tag) throw new Error('not an SVG chart: no <svg> element');
  const attr = (name: string) => Number(new RegExp(`\\s${name}="(\\d+(?:\\.\\d+)?)(?:px)?"`).exec(tag)?.[1]);
  const width = attr('width');
  const height = attr('height');
  return {
    width: Number.isFinite(width) && width > 0 ? Math.round(width) : 720,
    height: Number.isFinite(height) && height > 0 ? Math.round(height) : 420,
  };
}

/** Renders each SVG to its PNG file (exactly the SVG's width × height) with one Chromium for all of them. */
export async function renderSvgsToPng(jobs: readonly SvgPngJob[], chromiumPath?: string): Promise<void> {
  if (jobs.length === 0) return;
  const host = new BrowserHost({ executablePath: chromiumPath });
  try {
    const browser = await host.get();
    const context = await browser.newContext({ deviceScaleFactor: 1 });
    const page = await context.newPage();
    for (const job of jobs) {
      const { width, height } = svgSize(job.svg);
      await page.setViewportSize({ width, height });
      await page.setContent(
        `<!doctype html><html><head><meta charset="utf-8"></head>` +
          `<body style="margin:0;background:white">${job.svg}</body></html>`
      );
      fs.mkdirSync(path.dirname(job.file), { recursive: true });
      await page.screenshot({ path: job.file, clip: { x: 0, y: 0, width, height } });
    }
    await context.close();
  } finally {
    await host.close();
  }
}
