/**
 * Tells task files, dartflow suites and OSWorld indexes apart before validating them, so a file of the
 * wrong kind gets an error that says what it is and what was expected (not a list of zod complaints).
 * Pure and Node-free.
 */
import { TaskConfigError } from './errors';

export type JsonKind = 'task' | 'dartflow-suite' | 'osworld-index' | 'unknown';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keys both task formats need (dartflow's task files are a superset of OSWorld's). */
export const REQUIRED_TASK_KEYS = ['id', 'instruction', 'evaluator'] as const;

export function jsonKind(raw: unknown): JsonKind {
  if (!isRecord(raw)) return 'unknown';
  if ('instruction' in raw || 'evaluator' in raw) return 'task';
  if (Array.isArray(raw.tasks)) return 'dartflow-suite';
  const values = Object.values(raw);
  if (values.length > 0 && values.every((v) => Array.isArray(v) && v.every((x) => typeof x === 'string')))
    return 'osworld-index';
  return 'unknown';
}

/** Throws a TaskConfigError unless `raw` has the shape of a dartflow or OSWorld task file. */
export function assertTaskShape(raw: unknown, where: string): void {
  const kind = jsonKind(raw);
  if (kind === 'dartflow-suite' || kind === 'osworld-index') {
    const what = kind === 'dartflow-suite' ? 'a dartflow suite ({id, tasks})' : 'an OSWorld index ({domain: [id, …]})';
    throw new TaskConfigError(
      `${where}: this is ${what}, not a task file; give it as campaign.suite (a path) instead`,
      where
    );
  }
  if (!isRecord(raw))
    throw new TaskConfigError(
      `${where}: a task file must be a JSON object (dartflow or OSWorld task format), got ${Array.isArray(raw) ? 'a list' : typeof raw}`,
      where
    );
  // Without both of a task's defining keys the file is something else: say so instead of listing fields.
  if (!('instruction' in raw) && !('evaluator' in raw))
    throw new TaskConfigError(
      `${where}: neither a dartflow nor an OSWorld task file (no ${REQUIRED_TASK_KEYS.map((k) => `"${k}"`).join(', ')}; ` +
        'a task needs at least id, instruction and evaluator.func: see tasks/README.md)',
      where,
      'instruction'
    );
}
