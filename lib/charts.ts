/**
 * Charts for learning curves and benchmarks: a small SVG line/bar renderer (pure) and SVG → PNG through
 * the same headless Chromium the env uses (no native canvas dependency to install).
 */
import fs from 'node:fs';
import path from 'node:path';
import { CHROMIUM_ARGS } from '../envs/browser/host';

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
  /** Horizontal reference lines, e.g. the 90% target. */
  hLines?: Array<{ y: number; label: string }>;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceTicks(min: number, max: number, count = 5): number[] {
  if (max <= min) return [min];
  const raw = (max - min) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

export function lineChartSvg(series: Series[], o: LineChartOptions): string {
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  // The legend column grows with the longest series name.
  const m = { l: 64, r: Math.max(160, 40 + 7 * Math.max(0, ...series.map((s) => s.name.length))), t: 40, b: 52 };
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const xMin = Math.min(0, ...xs);
  const xMax = Math.max(1e-9, ...xs);
  const yMin = o.yMin ?? Math.min(0, ...ys);
  const yMax = o.yMax ?? Math.max(1e-9, ...ys) * 1.05;
  const sx = (x: number) => m.l + ((x - xMin) / (xMax - xMin || 1)) * (W - m.l - m.r);
  const sy = (y: number) => H - m.b - ((y - yMin) / (yMax - yMin || 1)) * (H - m.t - m.b);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2 - m.r / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
  ];
  for (const t of niceTicks(yMin, yMax)) {
    parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${m.l - 6}" y="${sy(t) + 4}" text-anchor="end">${t}</text>`);
  }
  for (const t of niceTicks(xMin, xMax)) {
    parts.push(`<line x1="${sx(t)}" x2="${sx(t)}" y1="${H - m.b}" y2="${H - m.b + 5}" stroke="#333"/>`);
    parts.push(`<text x="${sx(t)}" y="${H - m.b + 18}" text-anchor="middle">${t}</text>`);
  }
  parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`);
  parts.push(`<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#333"/>`);
  parts.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  parts.push(
    `<text transform="translate(16 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`
  );
  for (const h of o.hLines ?? []) {
    parts.push(
      `<line x1="${m.l}" x2="${W - m.r}" y1="${sy(h.y)}" y2="${sy(h.y)}" stroke="#999" stroke-dasharray="5 4"/>`
    );
    parts.push(`<text x="${W - m.r - 4}" y="${sy(h.y) - 4}" text-anchor="end" fill="#666">${esc(h.label)}</text>`);
  }
  series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length]!;
    if (s.points.length > 0) {
      const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
      parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
      for (const [x, y] of s.points)
        parts.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.5" fill="${color}"/>`);
    }
    parts.push(`<rect x="${W - m.r + 12}" y="${m.t + i * 20}" width="12" height="12" fill="${color}"/>`);
    parts.push(`<text x="${W - m.r + 30}" y="${m.t + i * 20 + 10}">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

export interface BarChartOptions {
  title: string;
  yLabel: string;
  width?: number;
  height?: number;
}

export function barChartSvg(bars: Array<{ label: string; value: number; color?: string }>, o: BarChartOptions): string {
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  const m = { l: 64, r: 24, t: 40, b: 80 };
  const yMax = Math.max(1e-9, ...bars.map((b) => b.value)) * 1.15;
  const bw = (W - m.l - m.r) / Math.max(1, bars.length);
  const sy = (y: number) => H - m.b - (y / yMax) * (H - m.t - m.b);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(o.title)}</text>`,
    `<text transform="translate(16 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  ];
  for (const t of niceTicks(0, yMax)) {
    parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`);
    parts.push(`<text x="${m.l - 6}" y="${sy(t) + 4}" text-anchor="end">${t}</text>`);
  }
  bars.forEach((b, i) => {
    const x = m.l + i * bw + bw * 0.15;
    parts.push(
      `<rect x="${x}" y="${sy(b.value)}" width="${bw * 0.7}" height="${H - m.b - sy(b.value)}" fill="${b.color ?? PALETTE[i % PALETTE.length]}"/>`
    );
    parts.push(
      `<text x="${x + bw * 0.35}" y="${sy(b.value) - 4}" text-anchor="middle">${Number(b.value.toPrecision(3))}</text>`
    );
    parts.push(`<text x="${x + bw * 0.35}" y="${H - m.b + 16}" text-anchor="middle">${esc(b.label)}</text>`);
  });
  parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`, '</svg>');
  return parts.join('\n');
}

/** Renders SVG to a PNG file with headless Chromium (the env's browser; CHROMIUM_PATH or /usr/bin/chromium). */
export async function writeSvgAsPng(
  svg: string,
  outFile: string,
  chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
): Promise<void> {
  const { chromium } = await import('playwright-core');
  const size = /width="(\d+)" height="(\d+)"/.exec(svg);
  const width = Number(size?.[1] ?? 720);
  const height = Number(size?.[2] ?? 420);
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [...CHROMIUM_ARGS],
  });
  try {
    const page = await browser.newPage({ viewport: { width, height } });
    await page.setContent(`<html><body style="margin:0">${svg}</body></html>`);
    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    await page.screenshot({ path: outFile, clip: { x: 0, y: 0, width, height } });
  } finally {
    await browser.close();
  }
}
