/**
 * The scale benchmark's points across runs (bench/scale.ts): each run measures some (envs, time scale, shards)
 * configurations and adds them to the results file, replacing only the same configurations.
 */
import fs from 'node:fs';
import type { ModeResult } from '../efficiency';

export interface ScalePoint {
  envs: number;
  /** Simulated latency scale (1 = real-time OSWorld-like latencies) and rollout.schedulerShards. */
  scale: number;
  shards: number;
  envWorkers: number;
  envConcurrency: number;
  result: ModeResult;
  /** Ideal rollout actions/min if every env were busy with env operations all the time. */
  idealActionsPerMin: number;
}

/** Points of an earlier scale.json; files from before `scale`/`shards` were per point take the file's scale and 1. */
export function readScalePoints(file: string): ScalePoint[] {
  if (!fs.existsSync(file)) return [];
  const doc = JSON.parse(fs.readFileSync(file, 'utf8')) as { scale?: number; points?: Partial<ScalePoint>[] };
  return (doc.points ?? []).map(
    (p) => ({ ...p, scale: p.scale ?? doc.scale ?? 0.2, shards: p.shards ?? 1 }) as ScalePoint
  );
}

const pointKey = (p: ScalePoint): string => `${p.envs}|${p.scale}|${p.shards}`;

/** Earlier points, minus those this run measured again, plus this run's; ordered by scale, shards, envs. */
export function mergeScalePoints(earlier: readonly ScalePoint[], fresh: readonly ScalePoint[]): ScalePoint[] {
  const replaced = new Set(fresh.map(pointKey));
  return [...earlier.filter((p) => !replaced.has(pointKey(p))), ...fresh].sort(
    (a, b) => a.scale - b.scale || a.shards - b.shards || a.envs - b.envs
  );
}
