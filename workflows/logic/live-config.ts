/** setConfig for a running campaign: only whitelisted fields, validated by the same schema as at start. */
import { CampaignConfigSchema, type CampaignConfig } from '../../schemas/config';
import { LIVE_TUNABLE_FIELDS } from '../messages';

/** Returns the new config, or throws (the Update validator's rejection) naming the field and the problem. */
export function applyLiveOverrides(config: CampaignConfig, overrides: Record<string, unknown>): CampaignConfig {
  const entries = Object.entries(overrides ?? {});
  if (entries.length === 0) throw new Error('setConfig needs at least one "section.field": value override');
  const next = JSON.parse(JSON.stringify(config)) as Record<string, Record<string, unknown>>;
  for (const [path, value] of entries) {
    if (!(LIVE_TUNABLE_FIELDS as readonly string[]).includes(path)) {
      throw new Error(
        `"${path}" cannot be changed on a running campaign; live fields: ${LIVE_TUNABLE_FIELDS.join(', ')}`
      );
    }
    const [section, field] = path.split('.') as [string, string];
    next[section]![field] = value;
  }
  const parsed = CampaignConfigSchema.safeParse(next);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new Error(`setConfig ${i.path.join('.')}: ${i.message}`);
  }
  return parsed.data;
}
