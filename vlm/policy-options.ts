/**
 * The `policy.options` record of a `uitars` episode, validated: a wrong value is a UiTarsOptionsError
 * naming `policy.options.<field>`, the value and what is allowed — never silently a default.
 */
import { z } from 'zod';
import { UiTarsOptionsSchema } from '../schemas/uitars-options';
import { PolicyConfigError } from '../activities/env/policy';

export class UiTarsOptionsError extends PolicyConfigError {
  constructor(message: string) {
    super(message);
    this.name = 'UiTarsOptionsError';
  }
}

export { UiTarsOptionsSchema };
export type UiTarsOptionsInput = z.infer<typeof UiTarsOptionsSchema>;

/** Validates the options record (unknown keys are ignored: the record is shared by every policy kind). */
export function parseUiTarsOptions(options: Record<string, unknown>): UiTarsOptionsInput {
  const r = UiTarsOptionsSchema.safeParse(options);
  if (r.success) {
    if (r.data.minPixels !== undefined && r.data.maxPixels !== undefined && r.data.minPixels > r.data.maxPixels) {
      throw new UiTarsOptionsError(
        `policy.options.minPixels: got ${r.data.minPixels}, above maxPixels ${r.data.maxPixels}; make minPixels ≤ maxPixels`
      );
    }
    return r.data;
  }
  const issue = r.error.issues[0];
  const field = String(issue?.path[0] ?? '');
  const shape = UiTarsOptionsSchema.shape as Record<string, z.ZodType>;
  const what = shape[field]?.description;
  throw new UiTarsOptionsError(
    `policy.options.${field}: got ${JSON.stringify(options[field])}; ${issue?.message ?? 'invalid'}${what ? ` — ${what}` : ''}`
  );
}
