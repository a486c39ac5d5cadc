/**
 * The scale benchmark's results across runs (bench/lib/scale-points.ts): a run replaces only the points it
 * measured again (same envs, time scale and shard count), and files from before points carried their own
 * scale and shard count still load.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { ModeResult } from '../../bench/efficiency';
import { mergeScalePoints, readScalePoints, type ScalePoint } from '../../bench/lib/scale-points';

const point = (envs: number, scale: number, shards: number, util: number): ScalePoint => ({
  envs,
  scale,
  shards,
  envWorkers: 1,
  envConcurrency: envs * 3,
  result: { metrics: { envUtilization: util } } as ModeResult,
  idealActionsPerMin: 0,
});
const utilOf = (p: ScalePoint) => p.result.metrics.envUtilization;

test('a run replaces only the points with the same envs, time scale and shards, and the rest stay in order', () => {
  const earlier = [point(64, 0.2, 1, 0.9), point(512, 0.2, 1, 0.35), point(512, 0.2, 4, 0.32), point(2048, 1, 1, 0.6)];
  const merged = mergeScalePoints(earlier, [point(512, 0.2, 1, 0.54)]);
  assert.deepEqual(
    merged.map((p) => [p.envs, p.scale, p.shards, utilOf(p)]),
    [
      [64, 0.2, 1, 0.9],
      [512, 0.2, 1, 0.54],
      [512, 0.2, 4, 0.32],
      [2048, 1, 1, 0.6],
    ]
  );
});

test('a results file from before per-point scale and shards loads with the file scale and one shard', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-scale-points-'));
  try {
    const file = path.join(dir, 'scale.json');
    assert.deepEqual(readScalePoints(file), [], 'no file: no points');
    const { scale: _s, shards: _k, ...old } = point(256, 0.2, 1, 0.9);
    fs.writeFileSync(file, JSON.stringify({ suite: 'scale', scale: 0.5, points: [old] }));
    const [p] = readScalePoints(file);
    assert.equal(p!.scale, 0.5);
    assert.equal(p!.shards, 1);
    assert.equal(utilOf(p!), 0.9);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
