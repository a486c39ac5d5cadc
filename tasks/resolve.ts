/**
 * Turns a validated task file into a TaskSpec: fills dartflow's optional fields with their documented
 * defaults and checks the rules that span fields. Pure and Node-free (run in activities, the env server,
 * the CLI and tests alike).
 *
 * Defaults (tasks/README.md):
 * - family: the domain folder the file was found in, else `related_apps` (one app: its name; several:
 *   "multi_apps", OSWorld's name for cross-app tasks), else `snapshot`;
 * - tier: the family's tier for dartflow's own families, else 2 (multi-step);
 * - maxSteps: the family's budget for dartflow's own families, else 30 (DART's global step budget);
 * - seeds: one train and one held-out seed, for tasks without randomness (an OSWorld task is the same
 *   task whatever the seed; the env ignores it).
 */
import { TaskConfigError } from './errors';
import { FAMILY_INFO, TASK_FAMILIES, isTaskFamily } from './families';
import {
  DOMAIN_PATTERN,
  FAMILY_PATTERN,
  TASK_ID_PATTERN,
  type SeedRange,
  type TaskFile,
  type TaskSpec,
} from './schema';

/** DART's step budget per episode [§2.5: 30], for tasks that do not set theirs. */
export const DEFAULT_MAX_STEPS = 30;
/** OSWorld tasks are multi-step. */
export const DEFAULT_TIER = 2;
/** Seeds of a task without randomness: one per split, held-out ≥ 1 000 000 like dartflow's own tasks. */
export const SINGLE_SEEDS: { train: SeedRange; heldOut: SeedRange } = {
  train: { from: 0, to: 1 },
  heldOut: { from: 1_000_000, to: 1_000_001 },
};
/** The setup step that makes a task one of dartflow's own pages (its family must then name a page). */
export const DARTFLOW_PAGE_STEP = 'dartflow_page';

/** Id of a task found in a domain folder: ids repeat across OSWorld domains, `<domain>.<id>` does not. */
export function namespacedId(domain: string, id: string): string {
  return `${domain}.${id}`;
}

function asLabel(s: string): string {
  return s
    .trim()
    .replace(/[^A-Za-z0-9._+-]+/g, '_')
    .slice(0, 80);
}

/** The family a task belongs to when its file does not say (see the module comment). */
export function defaultFamily(task: Pick<TaskFile, 'related_apps' | 'snapshot'>, domain?: string): string {
  if (domain) return domain;
  const apps = task.related_apps.map(asLabel).filter((a) => FAMILY_PATTERN.test(a));
  if (apps.length === 1) return apps[0]!;
  if (apps.length > 1) return 'multi_apps';
  const snap = asLabel(task.snapshot);
  return FAMILY_PATTERN.test(snap) ? snap : 'tasks';
}

function fail(where: string, field: string, message: string): never {
  throw new TaskConfigError(`${where}: field "${field}": ${message}`, where, field);
}

/**
 * Resolves a validated task file. `domain` is the folder the file was found in (`<domain>/<id>.json`):
 * the id is then namespaced `<domain>.<id>` and the original kept in `originalId`. A spec that was
 * resolved before (it carries `domain`) resolves to itself.
 */
export function resolveTaskSpec(task: TaskFile, where: string, opts: { domain?: string } = {}): TaskSpec {
  let { id, domain, originalId } = task;
  if (originalId === undefined && !TASK_ID_PATTERN.test(id))
    fail(where, 'id', `"${id}": letters, digits, ".", "_" or "-" (at most 120)`);
  if (opts.domain !== undefined && domain === undefined) {
    if (!DOMAIN_PATTERN.test(opts.domain))
      fail(where, 'domain', `folder name "${opts.domain}" must be letters, digits, "_" or "-" (at most 60)`);
    domain = opts.domain;
    originalId = id;
    id = namespacedId(domain, id);
  }
  const family = task.family ?? defaultFamily(task, domain);
  const known = isTaskFamily(family) ? FAMILY_INFO[family] : undefined;

  const isPage = task.config.some((s) => s.type === DARTFLOW_PAGE_STEP);
  if (isPage && !known)
    fail(
      where,
      'family',
      `"${family}" is not one of dartflow's page families (${TASK_FAMILIES.join(', ')}); ` +
        `a task with a "${DARTFLOW_PAGE_STEP}" setup step must name one`
    );
  if (known && task.tier !== undefined && task.tier !== known.tier)
    fail(where, 'tier', `family ${family} is tier ${known.tier}`);

  const seeds = task.seeds ?? SINGLE_SEEDS;
  // Held-out seeds must never be trained on: overlapping ranges would leak the evaluation set.
  if (seeds.train.from < seeds.heldOut.to && seeds.heldOut.from < seeds.train.to)
    fail(where, 'seeds.heldOut', 'held-out seed range overlaps the train range');

  return {
    ...task,
    id,
    ...(domain !== undefined ? { domain } : {}),
    ...(originalId !== undefined ? { originalId } : {}),
    family,
    tier: task.tier ?? known?.tier ?? DEFAULT_TIER,
    maxSteps: task.maxSteps ?? known?.maxSteps ?? DEFAULT_MAX_STEPS,
    seeds,
  };
}
