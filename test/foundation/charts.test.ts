import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { PNG } from 'pngjs';
import { loadInfraSettings } from '../../infra/settings';
import {
  barChartSvg,
  ChartDataError,
  lineChartSvg,
  seriesFromColumns,
  writeSvgAsPng,
  writeSvgsAsPng,
  type Series,
} from '../../lib/charts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-charts-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const chromium = loadInfraSettings().chromiumPath;

const MAGENTA = '#ff00ff';
const GREEN = '#00a000';
const ramp: Series = {
  name: 'ramp',
  color: MAGENTA,
  points: Array.from({ length: 11 }, (_, i) => [i * 10, i / 10] as [number, number]),
};

/** The data dots Plot drew for the series of this colour: [cx, cy] in SVG pixels. */
function dotCentres(svg: string, color: string): Array<[number, number]> {
  const group = new RegExp(`<g aria-label="dot" fill="${color}">(.*?)</g>`).exec(svg)?.[1];
  assert.ok(group, `no dot group of colour ${color}`);
  return [...group.matchAll(/cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => [Number(m[1]), Number(m[2])]);
}

const readPng = (file: string) => PNG.sync.read(fs.readFileSync(file));
const pixel = (png: PNG, x: number, y: number) => {
  const i = (Math.round(y) * png.width + Math.round(x)) * 4;
  return [png.data[i]!, png.data[i + 1]!, png.data[i + 2]!];
};
const near = (rgb: number[], hex: string, tol = 60) =>
  rgb.every((v, k) => Math.abs(v - parseInt(hex.slice(1 + 2 * k, 3 + 2 * k), 16)) <= tol);

test('lineChartSvg returns one self-contained <svg> of the requested size with title, labels and legend', () => {
  const svg = lineChartSvg([ramp, { name: 'flat', points: [[0, 0.5]] }], {
    title: 'Success vs episodes',
    xLabel: 'episodes',
    yLabel: 'success',
    width: 640,
    height: 360,
    yMin: 0,
    yMax: 1,
    hLines: [{ y: 0.9, label: '90% target' }],
    vLines: [{ x: 30, label: 'RL starts' }],
  });
  assert.match(svg, /^<svg\b[^>]*\swidth="640"[^>]*\sheight="360"/);
  assert.equal(svg.match(/<svg\b/g)?.length, 1);
  assert.doesNotMatch(svg, /<script/i);
  for (const text of ['Success vs episodes', 'episodes', 'success', 'ramp', 'flat', '90% target', 'RL starts'])
    assert.ok(svg.includes(`>${text}<`), `"${text}" is drawn`);
  assert.equal(dotCentres(svg, MAGENTA).length, 11);
});

test('names and titles are escaped (the viewer inlines the SVG in its pages)', () => {
  const svg = lineChartSvg([{ name: '<img src=x onerror=alert(1)>', points: [[1, 1]] }], {
    title: 'a & <b>',
    xLabel: 'x',
    yLabel: 'y',
  });
  assert.ok(svg.includes('&lt;img src=x onerror=alert(1)&gt;'));
  assert.ok(svg.includes('a &amp; &lt;b&gt;'));
  assert.doesNotMatch(svg, /<img|<b>/);
});

test('a line chart PNG has the SVG size, series colour at the data points and white where there is no data', async () => {
  const svg = lineChartSvg([ramp], { title: 't', xLabel: 'x', yLabel: 'y', width: 500, height: 300, yMin: 0, yMax: 1 });
  const file = path.join(dir, 'line.png');
  await writeSvgAsPng(svg, file, chromium);
  const png = readPng(file);
  assert.equal(png.width, 500);
  assert.equal(png.height, 300);
  const dots = dotCentres(svg, MAGENTA);
  for (const [x, y] of dots) assert.ok(near(pixel(png, x, y), MAGENTA), `magenta at (${x}, ${y}): ${pixel(png, x, y)}`);
  // The line rises from bottom left to top right: the plot area's top-left corner stays background.
  const [x0] = dots[0]!;
  const [, yTop] = dots[dots.length - 1]!;
  assert.ok(near(pixel(png, x0 + 12, yTop + 4), '#ffffff', 30), `white top-left: ${pixel(png, x0 + 12, yTop + 4)}`);
  let magenta = 0;
  for (let i = 0; i < png.data.length; i += 4)
    if (near([png.data[i]!, png.data[i + 1]!, png.data[i + 2]!], MAGENTA)) magenta++;
  assert.ok(magenta > 500, `the line is drawn (${magenta} magenta pixels)`);
});

test('bar chart PNGs (several with one Chromium) have bars of the given colours', async () => {
  const bars = [
    { label: 'sync', value: 10, color: GREEN },
    { label: 'async', value: 40, color: MAGENTA },
    { label: 'async', value: 20 }, // same label: still its own bar
  ];
  const svg = barChartSvg(bars, { title: 'Utilization', yLabel: '%', width: 420, height: 260 });
  assert.equal(svg.match(/<rect\b/g)?.length, 3);
  const files = [path.join(dir, 'bar-a.png'), path.join(dir, 'bar-b.png')];
  await writeSvgsAsPng(
    files.map((file) => ({ svg, file })),
    chromium
  );
  for (const file of files) {
    const png = readPng(file);
    assert.deepEqual([png.width, png.height], [420, 260]);
    const rects = [...svg.matchAll(/<rect\b[^>]*>/g)].map((m) =>
      ['x', 'y', 'width', 'height'].map((a) => Number(new RegExp(`\\s${a}="([\\d.]+)"`).exec(m[0])?.[1]))
    );
    assert.equal(rects.length, 3);
    const centre = (r: number[]) => pixel(png, r[0]! + r[2]! / 2, r[1]! + r[3]! / 2);
    assert.ok(near(centre(rects[0]!), GREEN), `green bar: ${centre(rects[0]!)}`);
    assert.ok(near(centre(rects[1]!), MAGENTA), `magenta bar: ${centre(rects[1]!)}`);
    assert.ok(rects[1]![3]! > rects[0]![3]! * 3.5, 'the 40 bar is four times the 10 bar');
  }
});

test('invalid series give a ChartDataError naming the chart and the series', () => {
  const o = { title: 'Held-out success', xLabel: 'x', yLabel: 'y' };
  const bad = (series: unknown, re: RegExp) =>
    assert.throws(
      () => lineChartSvg(series as Series[], o),
      (err: unknown) => err instanceof ChartDataError && re.test(err.message)
    );
  bad(
    [
      ramp,
      {
        name: 'loss',
        points: [
          [0, 1],
          [1, NaN],
        ],
      },
    ],
    /chart "Held-out success": series "loss": point 1 has y = NaN/
  );
  bad([{ name: 'kl', points: [[Infinity, 1]] }], /series "kl": point 0 has x = Infinity/);
  bad(
    [
      {
        name: 'entropy',
        points: [
          [0, 1],
          [1, 2, 3],
        ],
      },
    ],
    /series "entropy": point 1 is \[1,2,3\].*\[x, y\] pair/
  );
  bad([{ name: 'clip', points: [[0, null]] }], /series "clip": point 0 has y = null/);
  bad([{ name: 'tis', points: 'nope' }], /series "tis": points must be an array/);
  bad([{ points: [] }], /series 0 has no name/);
  assert.throws(
    () => seriesFromColumns('staleness', [1, 2, 3], [1, 2]),
    /series "staleness": 3 x values but 2 y values \(mismatched lengths\)/
  );
  assert.deepEqual(seriesFromColumns('s', [1, 2], [3, 4]).points, [
    [1, 3],
    [2, 4],
  ]);
  assert.throws(() => lineChartSvg([ramp], { ...o, yMin: 1, yMax: 0 }), /yMin 1 is not below yMax 0/);
  assert.throws(
    () => lineChartSvg([ramp], { ...o, hLines: [{ y: NaN, label: 'target' }] }),
    /hLines\[0\] \("target"\)/
  );
  assert.throws(() => lineChartSvg([ramp], { ...o, width: 0 }), /width is 0/);
  assert.throws(
    () =>
      barChartSvg(
        [
          { label: 'ok', value: 1 },
          { label: 'broken', value: NaN },
        ],
        { title: 'Discards', yLabel: 'n' }
      ),
    (err: unknown) =>
      err instanceof ChartDataError && /chart "Discards": bar "broken" \(index 1\) has value NaN/.test(err.message)
  );
});

test('empty input still draws axes (a campaign with no data yet)', () => {
  assert.match(lineChartSvg([], { title: 'none', xLabel: 'x', yLabel: 'y' }), /^<svg/);
  assert.match(lineChartSvg([{ name: 'empty', points: [] }], { title: 'none', xLabel: 'x', yLabel: 'y' }), />empty</);
  assert.match(barChartSvg([], { title: 'none', yLabel: 'y' }), /^<svg/);
});
