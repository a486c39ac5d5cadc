/**
 * How one step runs a response that holds several actions (UI-TARS may answer
 * "click(…)\n\ntype(…)"): all of them, in order, within the same step — the official parsers return a
 * list and DART executes it as one pyautogui script with a 1 s pause between actions. Execution stops
 * at the first action that ends the episode (finished / call_user → `done`) or fails (an unexecutable
 * action must not be followed by actions that assumed it worked). The step's result is the last
 * executed action's `done` and whether every executed action succeeded.
 *
 * Env-agnostic: the caller passes how to run one action (env.step) and, optionally, the pause.
 */
import type { CanonicalAction } from '../schemas/actions';

export interface ActionOutcome {
  done: boolean;
  actionOk: boolean;
  error?: string;
}

export interface SequenceOutcome extends ActionOutcome {
  /** How many actions ran (the rest were skipped after a `done` or a failure). */
  executed: number;
}

export async function runActionSequence(
  actions: readonly CanonicalAction[],
  step: (action: CanonicalAction) => Promise<ActionOutcome>,
  pauseBetween?: () => Promise<void>
): Promise<SequenceOutcome> {
  if (actions.length === 0) return { done: false, actionOk: false, error: 'no action to run', executed: 0 };
  let executed = 0;
  for (const action of actions) {
    if (executed > 0 && pauseBetween) await pauseBetween();
    const r = await step(action);
    executed++;
    const many = actions.length > 1;
    if (!r.actionOk) {
      const error = r.error ?? 'action failed';
      return {
        done: r.done,
        actionOk: false,
        error: many ? `action ${executed} of ${actions.length} (${action.type}): ${error}` : error,
        executed,
      };
    }
    if (r.done) return { done: true, actionOk: true, executed };
  }
  return { done: false, actionOk: true, executed };
}
