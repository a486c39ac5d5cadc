/**
 * MiniWoB++ tasks whose next correct action the env can compute (envs/browser/miniwob/adapter.js, from
 * core.getDOMInfo()): behaviour cloning and oracle pre-collection work on these only. Node-free; a test
 * checks the list equals the adapter's.
 */
export const MINIWOB_ORACLE_TASKS = [
  'click-button',
  'click-link',
  'click-dialog',
  'click-test',
  'click-test-2',
  'click-widget',
  'click-tab',
  'focus-text',
  'focus-text-2',
  'enter-text',
  'enter-password',
] as const;

export function hasMiniwobOracle(task: string): boolean {
  return (MINIWOB_ORACLE_TASKS as readonly string[]).includes(task);
}
