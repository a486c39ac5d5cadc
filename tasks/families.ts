import { TaskConfigError } from './errors';

/**
 * The task families dartflow ships (one HTML page each under tasks/pages/). Node-free metadata so
 * workflows may import it. `chance` is the estimated success rate of the uniform-random policy
 * (policy/random over 268 embedded-policy actions) within the default step budget: tests assert the
 * measured rate stays near it, which catches pages that reward accidental clicks. Values are the
 * geometric estimate rounded towards the rate measured on 50 seeds (test/env/browser-tasks.test.ts).
 */
export const TASK_FAMILIES = [
  'click-target',
  'click-colour',
  'click-shape',
  'focus-field',
  'enter-text',
  'tick-checkboxes',
  'pick-menu',
  'scroll-click',
] as const;
export type TaskFamily = (typeof TASK_FAMILIES)[number];

export interface FamilyInfo {
  tier: 1 | 2;
  /** Default step budget (task files may set their own). */
  maxSteps: number;
  chance: number;
  chanceWhy: string;
}

export const FAMILY_INFO: Record<TaskFamily, FamilyInfo> = {
  'click-target': {
    tier: 1,
    maxSteps: 4,
    chance: 0.35,
    chanceWhy: 'button covers ~4–12% of the screen; background clicks are free, 4 tries',
  },
  'click-colour': {
    tier: 1,
    maxSteps: 4,
    chance: 0.15,
    chanceWhy: 'first box hit ends the episode; right box is 1 of 3–5, boxes cover ~15–23% of the screen',
  },
  'click-shape': {
    tier: 1,
    maxSteps: 4,
    chance: 0.18,
    chanceWhy: 'first shape hit ends the episode; right shape is 1 of 3–4',
  },
  'focus-field': {
    tier: 1,
    maxSteps: 4,
    chance: 0.4,
    chanceWhy: 'first field focused ends the episode; right field is 1 of 2–3, fields cover ~25–40% of the screen',
  },
  'enter-text': {
    tier: 2,
    maxSteps: 6,
    chance: 0.005,
    chanceWhy: 'needs focus → type field 0 (p≈1/268) → submit in order',
  },
  'tick-checkboxes': {
    tier: 2,
    maxSteps: 8,
    chance: 0.02,
    chanceWhy: 'needs exactly the named 1–3 boxes ticked before a submit click',
  },
  'pick-menu': {
    tier: 2,
    maxSteps: 4,
    chance: 0.02,
    chanceWhy: 'needs a menu-button click, then the right item among 4–5',
  },
  'scroll-click': {
    tier: 2,
    maxSteps: 10,
    chance: 0.005,
    chanceWhy: 'target row starts off screen; needs several scroll-down tokens (p≈1/268 each) before a click',
  },
};

export const isTaskFamily = (s: string): s is TaskFamily => (TASK_FAMILIES as readonly string[]).includes(s);

/** Metadata of one of dartflow's page families (task families of other sources, e.g. OSWorld domains, have none). */
export function pageFamilyInfo(family: string): FamilyInfo {
  if (!isTaskFamily(family))
    throw new TaskConfigError(
      `"${family}" is not one of dartflow's page families (${TASK_FAMILIES.join(', ')})`,
      undefined,
      'family'
    );
  return FAMILY_INFO[family];
}
