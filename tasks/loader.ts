/**
 * Loads task files and suites from disk (tasks/defs/<id>.json, tasks/suites/<name>.json), validating
 * with zod. A malformed file fails with a TaskConfigError naming the file and the offending field.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { formatBytes, payloadBytes } from '../schemas/payload-limits';
import { TaskConfigError } from './errors';
import { SuiteSchema, TaskSpecSchema, type Split, type Suite, type TaskSpec } from './schema';

export const TASKS_DIR = __dirname;
export const DEFS_DIR = path.join(TASKS_DIR, 'defs');
export const SUITES_DIR = path.join(TASKS_DIR, 'suites');

function fieldPath(p: readonly PropertyKey[]): string {
  return p.length ? p.map(String).join('.') : '(root)';
}

/** Validates already-parsed JSON; `file` names the source in the error. */
export function parseWith<T>(schema: z.ZodType<T>, raw: unknown, file: string): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  const field = fieldPath(first?.path ?? []);
  const all = parsed.error.issues.map((i) => `field "${fieldPath(i.path)}": ${i.message}`).join('; ');
  throw new TaskConfigError(`${file}: ${all}`, file, field);
}

/**
 * Largest task or suite file accepted. A task travels in every episode's Temporal payload (2 MiB limit),
 * so an oversized one is refused here, by name, before it is read, parsed or sent anywhere.
 */
export const MAX_TASK_FILE_BYTES = 256 * 1024;

function tooLarge(file: string, bytes: number): TaskConfigError {
  return new TaskConfigError(
    `${file}: ${formatBytes(bytes)} is over the ${formatBytes(MAX_TASK_FILE_BYTES)} limit for a task file ` +
      '(tasks travel in every episode payload; keep large assets out of the task JSON and reference them instead)',
    file
  );
}

function readJson(file: string): unknown {
  let text: string;
  try {
    const size = fs.statSync(file).size;
    if (size > MAX_TASK_FILE_BYTES) throw tooLarge(file, size);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof TaskConfigError) throw err;
    throw new TaskConfigError(`${file}: cannot read (${(err as Error).message})`, file);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new TaskConfigError(`${file}: not valid JSON (${(err as Error).message})`, file);
  }
}

export function parseTaskSpec(raw: unknown, file = '<inline task>'): TaskSpec {
  const bytes = payloadBytes(raw);
  if (bytes > MAX_TASK_FILE_BYTES) throw tooLarge(file, bytes);
  return parseWith(TaskSpecSchema, raw, file);
}

export function loadTaskFile(file: string): TaskSpec {
  const task = parseTaskSpec(readJson(file), file);
  const expected = path.basename(file, '.json');
  if (task.id !== expected)
    throw new TaskConfigError(`${file}: field "id": "${task.id}" must match the file name "${expected}"`, file, 'id');
  return task;
}

export function loadTask(id: string, dir = DEFS_DIR): TaskSpec {
  if (!/^[A-Za-z0-9._-]+$/.test(id) || id.startsWith('.')) throw new TaskConfigError(`invalid task id "${id}"`);
  return loadTaskFile(path.join(dir, `${id}.json`));
}

export function listSuites(dir = SUITES_DIR): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort();
}

export interface LoadedSuite extends Suite {
  taskSpecs: TaskSpec[];
}

export function loadSuite(name: string, opts: { suitesDir?: string; defsDir?: string } = {}): LoadedSuite {
  const file = path.join(opts.suitesDir ?? SUITES_DIR, `${name}.json`);
  if (!fs.existsSync(file))
    throw new TaskConfigError(`unknown suite "${name}" (known: ${listSuites(opts.suitesDir).join(', ')})`, file);
  const suite = parseWith(SuiteSchema, readJson(file), file);
  return { ...suite, taskSpecs: suite.tasks.map((id) => loadTask(id, opts.defsDir)) };
}

/** `count` deterministic seeds of a split, evenly spread over its range (for evaluation sets). */
export function seedsFor(task: TaskSpec, split: Split, count: number): number[] {
  const r = task.seeds[split];
  const span = r.to - r.from;
  const n = Math.min(count, span);
  return Array.from({ length: n }, (_, i) => r.from + Math.floor((i * span) / n));
}

/** Whether a seed belongs to a split of the task. */
export function seedInSplit(task: TaskSpec, split: Split, seed: number): boolean {
  const r = task.seeds[split];
  return seed >= r.from && seed < r.to;
}
