/**
 * The one place benchmarks write (and re-read) their JSON and charts: .data/bench by default, docs/bench
 * with --publish (bench/lib/output-dir.ts). `npm run bench` sets the choice; a benchmark script run on its
 * own (`npx tsx bench/env-throughput.ts --publish`) takes it from its command line.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadInfraSettings, PROJECT_ROOT } from '../../infra/settings';
import { benchOutputDir, PUBLISH_FLAG } from './output-dir';

let publish = process.argv.includes(PUBLISH_FLAG);

export function setBenchPublish(value: boolean): void {
  publish = value;
}

export function benchPublishing(): boolean {
  return publish;
}

/** The output directory, created if missing. */
export function benchOutDir(): string {
  const dir = benchOutputDir({ publish, projectRoot: PROJECT_ROOT, dataDir: loadInfraSettings().dataDir });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** The published (tracked) results folder, docs/bench, whatever --publish says: for redrawing its charts. */
export function publishedBenchDir(): string {
  return benchOutputDir({ publish: true, projectRoot: PROJECT_ROOT, dataDir: loadInfraSettings().dataDir });
}

/** A file in the output directory, e.g. benchOutFile('scale.json'). */
export function benchOutFile(name: string): string {
  return path.join(benchOutDir(), name);
}

/** For log lines: the path relative to the project when it is inside it. */
export function shownPath(file: string): string {
  const rel = path.relative(PROJECT_ROOT, file);
  return rel.startsWith('..') ? file : rel;
}

/** What a suite returns when this run wrote no results (a segment of a longer run: a later one writes them). */
export const NOTHING_WRITTEN = Symbol('nothing written');
