/**
 * Loads task files and suites from disk, validating with zod: dartflow's own (tasks/defs/<id>.json,
 * tasks/suites/<name>.json) and OSWorld's (a folder of `<domain>/<id>.json` files with its
 * `test_all.json` index, or any folder of task files). A malformed file fails with a TaskConfigError
 * naming the file and the offending field. MinIO-stored suites: tasks/store-suite.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { z } from 'zod';
import { formatBytes, payloadBytes } from '../schemas/payload-limits';
import { TaskConfigError } from './errors';
import { assertTaskShape, jsonKind } from './format';
import { resolveTaskSpec } from './resolve';
import { OsworldIndexSchema, SuiteSchema, TaskFileSchema, type Split, type Suite, type TaskSpec } from './schema';
import { parseSuiteLocation } from './suite-location';
import { DEFAULT_INDEX_FILE, planFromIndex, planFromListing, type PlannedTask } from './suite-plan';

export const TASKS_DIR = __dirname;
export const DEFS_DIR = path.join(TASKS_DIR, 'defs');
/** MiniWoB++ task definitions (ids `miniwob.<task>`; the pages come from the pinned package, docs/miniwob.md). */
export const MINIWOB_DEFS_DIR = path.join(TASKS_DIR, 'miniwob', 'defs');

/** Where a named suite's task id is defined: dartflow's own tasks, else the MiniWoB++ ones. */
function defsDirOf(id: string): string {
  return fs.existsSync(path.join(DEFS_DIR, `${id}.json`)) ? DEFS_DIR : MINIWOB_DEFS_DIR;
}
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
/** Largest index (`test_all.json`): ids only, never sent in a payload; OSWorld's is ~17 KB for 369 tasks. */
export const MAX_INDEX_FILE_BYTES = 4 * 1024 * 1024;

export function tooLarge(file: string, bytes: number, limit = MAX_TASK_FILE_BYTES): TaskConfigError {
  return new TaskConfigError(
    `${file}: ${formatBytes(bytes)} is over the ${formatBytes(limit)} limit for a task file ` +
      '(tasks travel in every episode payload; keep large assets out of the task JSON and reference them instead)',
    file
  );
}

/** JSON.parse with the file named in the error. */
export function parseJsonText(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new TaskConfigError(`${file}: not valid JSON (${(err as Error).message})`, file);
  }
}

function readJson(file: string, limit = MAX_TASK_FILE_BYTES): unknown {
  let text: string;
  try {
    const size = fs.statSync(file).size;
    if (size > limit) throw tooLarge(file, size, limit);
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof TaskConfigError) throw err;
    throw new TaskConfigError(`${file}: cannot read (${(err as Error).message})`, file);
  }
  return parseJsonText(text, file);
}

/**
 * Validates a task in either format and resolves dartflow's defaults (tasks/resolve.ts). `domain`: the
 * folder the file was found in, which namespaces its id.
 */
export function parseTaskSpec(raw: unknown, file = '<inline task>', opts: { domain?: string } = {}): TaskSpec {
  const bytes = payloadBytes(raw);
  if (bytes > MAX_TASK_FILE_BYTES) throw tooLarge(file, bytes);
  assertTaskShape(raw, file);
  return resolveTaskSpec(parseWith(TaskFileSchema, raw, file), file, opts);
}

/** A task file's id must be its file name: ids are looked up by file name. */
export function checkIdMatchesFileName(task: TaskSpec, file: string): TaskSpec {
  const expected = path.posix.basename(file.replace(/\\/g, '/'), '.json');
  const id = task.originalId ?? task.id;
  if (id !== expected)
    throw new TaskConfigError(`${file}: field "id": "${id}" must match the file name "${expected}"`, file, 'id');
  return task;
}

export function loadTaskFile(file: string, opts: { domain?: string } = {}): TaskSpec {
  return checkIdMatchesFileName(parseTaskSpec(readJson(file), file, opts), file);
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

/** Two files resolving to one id would share stats and pool entries: refuse, naming both. */
export function checkUniqueIds(specs: TaskSpec[], files: string[], where: string): void {
  const first = new Map<string, string>();
  specs.forEach((t, i) => {
    const prev = first.get(t.id);
    if (prev !== undefined)
      throw new TaskConfigError(
        `${where}: task id "${t.id}" comes from two files (${prev} and ${files[i]}); rename one`,
        files[i],
        'id'
      );
    first.set(t.id, files[i]!);
  });
}

/**
 * Loads a suite: a name (tasks/suites/<name>.json, tasks from tasks/defs/) or a path on this machine —
 * a folder of task files, an OSWorld folder with `test_all.json`, or an index file. MinIO prefixes
 * (`s3://…`) are read by `loadSuiteFromStore`.
 */
export function loadSuite(spec: string, opts: { suitesDir?: string; defsDir?: string } = {}): LoadedSuite {
  const loc = parseSuiteLocation(spec);
  if (loc.kind === 'object-store')
    throw new TaskConfigError(
      `campaign.suite "${spec}" is a MinIO prefix: it is read by the campaign (loadSuiteFromStore), not from disk`,
      undefined,
      'campaign.suite'
    );
  if (loc.kind === 'path') return loadSuiteFromPath(loc.path);
  const file = path.join(opts.suitesDir ?? SUITES_DIR, `${loc.name}.json`);
  if (!fs.existsSync(file))
    throw new TaskConfigError(
      `unknown suite "${loc.name}" (known: ${listSuites(opts.suitesDir).join(', ')}; ` +
        `for a folder or an index file give a path, e.g. ./${loc.name})`,
      file,
      'campaign.suite'
    );
  const suite = parseWith(SuiteSchema, readJson(file), file);
  return { ...suite, taskSpecs: suite.tasks.map((id) => loadTask(id, opts.defsDir ?? defsDirOf(id))) };
}

/** Relative "/" paths of the JSON files under `root`, at most `depth` folders down (OSWorld: examples/<domain>/<id>.json). */
function listJsonFiles(root: string, depth = 3): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string, left: number) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      throw new TaskConfigError(`${dir}: cannot list the folder (${(err as Error).message})`, dir);
    }
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory() && left > 1) walk(path.join(dir, e.name), r, left - 1);
      else if (e.isFile() && e.name.endsWith('.json')) out.push(r);
    }
  };
  walk(root, '', depth);
  return out.sort();
}

function suiteId(name: string): string {
  return (
    name
      .replace(/\.json$/, '')
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .slice(0, 120) || 'suite'
  );
}

function loadPlanned(root: string, plan: PlannedTask[], where: string, description: string): LoadedSuite {
  if (plan.length === 0)
    throw new TaskConfigError(
      `${where}: no task files found (expected <id>.json files, <domain>/<id>.json files or a ${DEFAULT_INDEX_FILE} index)`,
      where,
      'campaign.suite'
    );
  const files = plan.map((p) => path.join(root, ...p.rel.split('/')));
  const taskSpecs = plan.map((p, i) => loadTaskFile(files[i]!, p.domain ? { domain: p.domain } : {}));
  checkUniqueIds(taskSpecs, files, where);
  return { id: suiteId(path.basename(where)), description, tasks: taskSpecs.map((t) => t.id), taskSpecs };
}

function loadSuiteFromPath(p: string): LoadedSuite {
  const expanded = p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
  const abs = path.resolve(expanded);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(abs);
  } catch {
    throw new TaskConfigError(
      `campaign.suite "${p}": ${abs} does not exist (give a suite name such as "quickstart", a folder of task ` +
        `files, an index file such as ${DEFAULT_INDEX_FILE}, or s3://<bucket>/<prefix>)`,
      abs,
      'campaign.suite'
    );
  }
  if (stat.isDirectory()) {
    const files = listJsonFiles(abs);
    if (files.includes(DEFAULT_INDEX_FILE)) return loadIndexFile(path.join(abs, DEFAULT_INDEX_FILE), files);
    return loadPlanned(abs, planFromListing(files), abs, `task files under ${abs}`);
  }
  return loadIndexFile(abs);
}

function loadIndexFile(file: string, listing?: string[]): LoadedSuite {
  const raw = readJson(file, MAX_INDEX_FILE_BYTES);
  const root = path.dirname(file);
  const kind = jsonKind(raw);
  if (kind === 'dartflow-suite') {
    // A dartflow suite outside the package: its tasks next to it, or in a sibling defs/ folder (the package layout).
    const suite = parseWith(SuiteSchema, raw, file);
    const dirs = [root, path.join(root, '..', 'defs')];
    const taskFiles = suite.tasks.map((id, i) => {
      const found = dirs.map((d) => path.join(d, `${id}.json`)).find((f) => fs.existsSync(f));
      if (!found)
        throw new TaskConfigError(
          `${file}: field "tasks.${i}": no task file "${id}.json" in ${dirs.join(' or ')}`,
          file,
          `tasks.${i}`
        );
      return found;
    });
    const taskSpecs = taskFiles.map((f) => loadTaskFile(f));
    checkUniqueIds(taskSpecs, taskFiles, file);
    return { ...suite, taskSpecs };
  }
  if (kind !== 'osworld-index')
    throw new TaskConfigError(
      `${file}: neither a suite index ({domain: [id, …]}, like OSWorld's ${DEFAULT_INDEX_FILE}) nor a dartflow suite ({id, tasks}); ` +
        'to train on one task file, give its folder',
      file
    );
  const index = parseWith(OsworldIndexSchema, raw, file);
  const files = new Set(listing ?? listJsonFiles(root));
  const plan = planFromIndex(index, path.basename(file), files, (rel) => path.join(root, ...rel.split('/')));
  return loadPlanned(root, plan, file, `OSWorld index ${file}`);
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
