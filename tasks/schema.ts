/**
 * Task file schema: a superset of OSWorld's task JSON (id, snapshot, instruction, source, config,
 * evaluator, related_apps, …) plus dartflow fields (family, tier, maxSteps, seed ranges per split).
 * Unknown OSWorld fields are kept (loose objects) so an OSWorld task file passes through unchanged.
 * Node-free (workflows import the types).
 */
import { z } from 'zod';
import { FAMILY_INFO, TASK_FAMILIES } from './families';

const SeedRangeSchema = z
  .object({ from: z.number().int().min(0), to: z.number().int().min(1) })
  .refine((r) => r.to > r.from, { message: 'seed range must have to > from (half-open [from, to))' });
export type SeedRange = z.infer<typeof SeedRangeSchema>;

export const SPLITS = ['train', 'heldOut'] as const;
export type Split = (typeof SPLITS)[number];

const SetupStepSchema = z
  .object({ type: z.string().min(1), parameters: z.record(z.string(), z.unknown()).default({}) })
  .loose();

export const TaskSpecSchema = z
  .object({
    // OSWorld fields
    id: z.string().regex(/^[A-Za-z0-9._-]{1,120}$/, 'letters, digits, ".", "_" or "-" (at most 120)'),
    snapshot: z.string().default('dartflow-browser'),
    instruction: z.string().min(1),
    source: z.string().default('dartflow'),
    config: z.array(SetupStepSchema).default([]),
    evaluator: z
      .object({
        func: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
        conj: z.enum(['and', 'or']).optional(),
        result: z.unknown().optional(),
        expected: z.unknown().optional(),
        options: z.unknown().optional(),
        postconfig: z.array(SetupStepSchema).optional(),
      })
      .loose(),
    related_apps: z.array(z.string()).default([]),
    // dartflow fields
    family: z.enum(TASK_FAMILIES),
    tier: z.union([z.literal(1), z.literal(2)]),
    maxSteps: z.number().int().min(1).max(100),
    seeds: z.object({ train: SeedRangeSchema, heldOut: SeedRangeSchema }),
  })
  .loose()
  .superRefine((t, ctx) => {
    if (FAMILY_INFO[t.family].tier !== t.tier) {
      ctx.addIssue({
        code: 'custom',
        path: ['tier'],
        message: `family ${t.family} is tier ${FAMILY_INFO[t.family].tier}`,
      });
    }
    const a = t.seeds.train;
    const b = t.seeds.heldOut;
    // Held-out seeds must never be trained on: overlapping ranges would leak the evaluation set.
    if (a.from < b.to && b.from < a.to) {
      ctx.addIssue({
        code: 'custom',
        path: ['seeds', 'heldOut'],
        message: 'held-out seed range overlaps the train range',
      });
    }
  });
export type TaskSpec = z.infer<typeof TaskSpecSchema>;
export type TaskSpecInput = z.input<typeof TaskSpecSchema>;

export const SuiteSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9._-]{1,120}$/),
  description: z.string().default(''),
  tasks: z.array(z.string().min(1)).min(1),
});
export type Suite = z.infer<typeof SuiteSchema>;
