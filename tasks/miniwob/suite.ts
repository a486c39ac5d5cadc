/**
 * Loads dartflow's MiniWoB++ suites. Task files live in tasks/miniwob/defs/ (`miniwob.<task>.json`); the
 * suites are tasks/suites/miniwob.json (all 36) and tasks/suites/miniwob-easy.json (the 11 with an oracle),
 * so campaigns name them like any suite (`campaign.suite=miniwob-easy`); `loadSuite` finds their tasks in
 * tasks/miniwob/defs/.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TaskConfigError } from '../errors';
import {
  checkUniqueIds,
  loadTask,
  MINIWOB_DEFS_DIR,
  parseJsonText,
  parseWith,
  SUITES_DIR,
  type LoadedSuite,
} from '../loader';
import { SuiteSchema } from '../schema';

export { MINIWOB_DEFS_DIR };
export const MINIWOB_SUITE_FILES: Record<string, string> = {
  miniwob: path.join(SUITES_DIR, 'miniwob.json'),
  'miniwob-easy': path.join(SUITES_DIR, 'miniwob-easy.json'),
};

/** `miniwob` (36 tasks) or `miniwob-easy` (11 oracle tasks), validated like any suite. */
export function loadMiniwobSuite(name: keyof typeof MINIWOB_SUITE_FILES | string = 'miniwob'): LoadedSuite {
  const file = MINIWOB_SUITE_FILES[name];
  if (!file)
    throw new TaskConfigError(
      `unknown MiniWoB++ suite "${name}" (known: ${Object.keys(MINIWOB_SUITE_FILES).join(', ')})`,
      undefined,
      'campaign.suite'
    );
  const suite = parseWith(SuiteSchema, parseJsonText(fs.readFileSync(file, 'utf8'), file), file);
  const taskSpecs = suite.tasks.map((id) => loadTask(id, MINIWOB_DEFS_DIR));
  checkUniqueIds(
    taskSpecs,
    suite.tasks.map((id) => path.join(MINIWOB_DEFS_DIR, `${id}.json`)),
    file
  );
  return { ...suite, taskSpecs };
}
