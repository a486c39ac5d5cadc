/**
 * The MiniWoB++ task kind on the task side: a task whose `config` has a `miniwob_page` setup step runs the
 * real MiniWoB++ page of that name (from the installed `miniwob` wheel, envs/browser/miniwob/). This module
 * only reads and validates that step; it is pure and Node-free (workflows and the CLI may import it).
 *
 *   "config": [{ "type": "miniwob_page", "parameters": { "task": "click-button", "timeLimit": "off" } }]
 *
 * `timeLimit` (docs/miniwob.md, "Time limit"): MiniWoB ends an episode with raw reward −1 when its
 * wall-clock limit (core.EPISODE_MAX_TIME, 10 s unless the page sets its own) runs out.
 * - "off" (default): no wall-clock limit; the task's `maxSteps` budget ends the episode instead. A
 *   dartflow step includes policy latency, which depends on load (queued episodes, batching, a VLM's
 *   seconds per step), so a wall-clock limit would turn infrastructure speed into reward.
 * - "page": the page's own limit, as in MiniWoB's published setup.
 * - a number: that many milliseconds.
 */
import { z } from 'zod';
import { TaskConfigError } from '../errors';

export const MINIWOB_PAGE_STEP = 'miniwob_page';
/** MiniWoB's page (160×210: a 50 px instruction bar over the 160×160 task area). */
export const MINIWOB_SCREEN = { width: 160, height: 210 } as const;
/** Task page names in the wheel: `miniwob/html/miniwob/<name>.html`. */
export const MINIWOB_TASK_NAME = /^[a-z0-9][a-z0-9-]{0,79}$/;
/** Largest timer a browser honours (setTimeout clamps longer delays to 0, i.e. an instant timeout). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const MiniwobTimeLimitSchema = z.union([
  z.literal('off'),
  z.literal('page'),
  z.number().int().min(1000).max(MAX_TIMER_MS),
]);
export type MiniwobTimeLimit = z.infer<typeof MiniwobTimeLimitSchema>;

const ParamsSchema = z.object({
  task: z.string().regex(MINIWOB_TASK_NAME, 'a MiniWoB++ task page name such as "click-button"'),
  timeLimit: MiniwobTimeLimitSchema.default('off'),
});

export interface MiniwobPage {
  /** MiniWoB++ task name (page file name without .html). */
  task: string;
  timeLimit: MiniwobTimeLimit;
}

interface TaskLike {
  id: string;
  config: ReadonlyArray<{ type: string; parameters?: Record<string, unknown> }>;
}

/** Whether a task runs a MiniWoB++ page (without validating the step). */
export function isMiniwobTask(task: TaskLike): boolean {
  return task.config.some((s) => s.type === MINIWOB_PAGE_STEP);
}

/**
 * The MiniWoB++ page a task runs, or null for any other task. A malformed step is a TaskConfigError naming
 * the task and the field (bad task files are permanent failures, never retried).
 */
export function miniwobPageOf(task: TaskLike): MiniwobPage | null {
  const steps = task.config.filter((s) => s.type === MINIWOB_PAGE_STEP);
  if (steps.length === 0) return null;
  if (steps.length > 1)
    throw new TaskConfigError(
      `task "${task.id}": more than one "${MINIWOB_PAGE_STEP}" setup step`,
      undefined,
      'config'
    );
  const parsed = ParamsSchema.safeParse(steps[0]!.parameters ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = `config.${MINIWOB_PAGE_STEP}.parameters.${(issue?.path ?? []).map(String).join('.')}`;
    throw new TaskConfigError(`task "${task.id}": field "${field}": ${issue?.message ?? 'invalid'}`, undefined, field);
  }
  return parsed.data;
}
