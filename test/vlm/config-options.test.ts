/**
 * A VLM campaign's `policy.options` (schemas/config.ts) are UI-TARS episode options the env worker's
 * policy accepts (vlm/policy-options.ts): every config field is one the policy reads, and a parsed
 * config's options pass the policy's validation unchanged (the campaign forwards them with the model).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCampaignConfig } from '../../config/load';
import { PolicySchema } from '../../schemas/config';
import { parseUiTarsOptions, UiTarsOptionsSchema } from '../../vlm/policy-options';

test('policy.options fields are UI-TARS policy options and pass its validation', () => {
  const inner = PolicySchema.shape.options.unwrap();
  const configKeys = Object.keys(inner.shape);
  assert.ok(configKeys.length >= 6, `config options: ${configKeys.join(', ')}`);
  for (const k of configKeys) assert.ok(k in UiTarsOptionsSchema.shape, `policy.options.${k} is a UI-TARS option`);
  const cfg = parseCampaignConfig({
    policy: {
      kind: 'vlm',
      vlmModel: 'ui-tars',
      options: {
        maxTokens: 64,
        topLogprobs: 2,
        logitBias: { '151655': -100 },
        coordModel: 'ui-tars',
        minPixels: 3136,
        maxPixels: 12544,
        password: null,
      },
    },
  });
  const forwarded = { model: cfg.policy.vlmModel, ...cfg.policy.options };
  assert.deepEqual(parseUiTarsOptions(forwarded), forwarded);
});
