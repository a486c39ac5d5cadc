/**
 * Task file schema. A task file is either an OSWorld task JSON, unchanged (id, snapshot, instruction,
 * source, config, trajectory, related_apps, evaluator, …), or a dartflow task file: the same keys plus
 * dartflow's own fields (family, tier, maxSteps, seed ranges per split), which are all optional. Unknown
 * keys are kept (loose objects) so a task file of another OSWorld release passes through unchanged.
 * Defaults for the dartflow fields are applied by `resolveTaskSpec` (tasks/resolve.ts), not here, because
 * they depend on where the file was found (its domain folder).
 * Node-free (workflows import the types).
 */
import { z } from 'zod';

const SeedRangeSchema = z
  .object({ from: z.number().int().min(0), to: z.number().int().min(1) })
  .refine((r) => r.to > r.from, { message: 'seed range must have to > from (half-open [from, to))' });
export type SeedRange = z.infer<typeof SeedRangeSchema>;

export const SPLITS = ['train', 'heldOut'] as const;
export type Split = (typeof SPLITS)[number];

export const TASK_ID_PATTERN = /^[A-Za-z0-9._-]{1,120}$/;
/** A resolved id may carry a domain prefix (`<domain>.<id>`: 60 + 1 + 120); a file's own id is checked in resolve.ts. */
const RESOLVED_ID_PATTERN = /^[A-Za-z0-9._-]{1,181}$/;
/** Domain folder names (OSWorld: chrome, libreoffice_calc, multi_apps, …): no "." so a namespaced id splits unambiguously. */
export const DOMAIN_PATTERN = /^[A-Za-z0-9_-]{1,60}$/;
/** A family is a stats label (and, for dartflow's own pages, the page to load). */
export const FAMILY_PATTERN = /^[A-Za-z0-9._+-]{1,80}$/;

/** One OSWorld setup step (config and evaluator.postconfig): download, launch, execute, open, … */
const SetupStepSchema = z
  .object({ type: z.string().min(1), parameters: z.record(z.string(), z.unknown()).default({}) })
  .loose();
export type SetupStep = z.infer<typeof SetupStepSchema>;

const EvaluatorSchema = z
  .object({
    /** One metric, or several combined with `conj` (then `result` / `expected` are lists of the same length). */
    func: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    conj: z.enum(['and', 'or']).optional(),
    /** Getter specs `{type, …}` (or lists of them; entries of `expected` may be null). */
    result: z.unknown().optional(),
    expected: z.unknown().optional(),
    /** Metric options: a dict, or a list (one per metric). */
    options: z.unknown().optional(),
    /** Setup steps run before evaluation. */
    postconfig: z.array(SetupStepSchema).optional(),
  })
  .loose()
  .superRefine((e, ctx) => {
    if (!Array.isArray(e.func)) return;
    for (const key of ['result', 'expected'] as const) {
      const v = e[key];
      if (v === undefined) continue;
      if (!Array.isArray(v) || v.length !== e.func.length) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `with ${e.func.length} metric functions in "func", "${key}" must be a list of ${e.func.length} getter specs`,
        });
      }
    }
  });

const taskFileShape = {
  // OSWorld fields
  id: z.string().regex(RESOLVED_ID_PATTERN, 'letters, digits, ".", "_" or "-" (at most 120)'),
  snapshot: z.string().default('dartflow-browser'),
  instruction: z.string().min(1),
  /** Where the task comes from: a URL or name, or a list of them (one OSWorld file has a list). */
  source: z.union([z.string(), z.array(z.string())]).default('dartflow'),
  config: z.array(SetupStepSchema).default([]),
  evaluator: EvaluatorSchema,
  related_apps: z.array(z.string()).default([]),
  // dartflow fields (all optional; defaults in tasks/resolve.ts)
  family: z.string().regex(FAMILY_PATTERN, 'letters, digits, ".", "_", "+" or "-" (at most 80)').optional(),
  tier: z.union([z.literal(1), z.literal(2)]).optional(),
  maxSteps: z.number().int().min(1).max(100).optional(),
  seeds: z.object({ train: SeedRangeSchema, heldOut: SeedRangeSchema }).optional(),
  /** Set by the loader for a file found in a domain folder (`<domain>/<id>.json`); `id` is then `<domain>.<originalId>`. */
  domain: z.string().regex(DOMAIN_PATTERN, 'letters, digits, "_" or "-" (at most 60)').optional(),
  originalId: z.string().regex(TASK_ID_PATTERN).optional(),
};
export const TaskFileSchema = z.object(taskFileShape).loose();
/** Keys of other OSWorld releases (trajectory, task_id, os, …), kept unchanged. */
type OtherKeys = { [key: string]: unknown };
type KnownTaskFields = z.infer<z.ZodObject<typeof taskFileShape>>;
export type TaskFile = KnownTaskFields & OtherKeys;

/** A task with every dartflow field resolved: what the campaign, env workers and benches use. */
export type TaskSpec = Omit<KnownTaskFields, 'family' | 'tier' | 'maxSteps' | 'seeds'> & {
  family: string;
  tier: 1 | 2;
  maxSteps: number;
  seeds: { train: SeedRange; heldOut: SeedRange };
} & OtherKeys;
export type TaskSpecInput = z.input<typeof TaskFileSchema>;

/** dartflow's own suite file (tasks/suites/<name>.json): task ids looked up in tasks/defs/. */
export const SuiteSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9._-]{1,120}$/),
  description: z.string().default(''),
  tasks: z.array(z.string().min(1)).min(1),
});
export type Suite = z.infer<typeof SuiteSchema>;

/** OSWorld's `test_all.json`-style index: `{domain: [id, …]}`, task files at `[examples/]<domain>/<id>.json`. */
export const OsworldIndexSchema = z
  .record(
    z.string().regex(DOMAIN_PATTERN, 'a domain folder name: letters, digits, "_" or "-"'),
    z.array(z.string().regex(TASK_ID_PATTERN, 'a task id: letters, digits, ".", "_" or "-" (at most 120)'))
  )
  .refine((idx) => Object.values(idx).some((ids) => ids.length > 0), { message: 'the index lists no task' });
export type OsworldIndex = z.infer<typeof OsworldIndexSchema>;
