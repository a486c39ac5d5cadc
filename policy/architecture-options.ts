/**
 * The embedded CNN's optional parts a campaign switches on (`policy.<name>: true`). One list, so the
 * network choice (spec.specForPolicy), the checkpoint key (spec.specKey), the trainer's input
 * (campaign-state.trainerPolicyOf) and the config's refusal for VLM campaigns cannot drift apart.
 * No imports: the campaign workflow uses it too.
 */
export const ARCHITECTURE_OPTIONS = ['clickMaxContext', 'clickWordQuery', 'hueInput'] as const;
export type ArchitectureOption = (typeof ARCHITECTURE_OPTIONS)[number];

/**
 * Only the options that are on, as `{ name: true }` in list order. An option that is off is absent, not
 * false, so the specs, checkpoint keys and trainer inputs of campaigns from before it stay what they were.
 */
export function architectureOptionsOn(
  settings: Partial<Record<ArchitectureOption, boolean | undefined>>
): Partial<Record<ArchitectureOption, true>> {
  const on: Partial<Record<ArchitectureOption, true>> = {};
  for (const option of ARCHITECTURE_OPTIONS) if (settings[option]) on[option] = true;
  return on;
}
