/**
 * The UI-TARS episode options (the `policy.options` record of a `uitars` episode), one schema for the
 * campaign config (schemas/config.ts: policy.options, without `model`, which policy.vlmModel sets) and the
 * env-side policy (vlm/policy-options.ts). Pure zod: workflows load it through the config schema.
 */
import { z } from 'zod';

const positiveInt = z.number().int().positive();

export const UiTarsOptionsSchema = z.object({
  model: z.string().min(1).optional().describe('the model name the server serves (vLLM --served-model-name)'),
  topLogprobs: z
    .number()
    .int()
    .min(0)
    .max(20)
    .optional()
    .describe('alternatives per token for the entropy estimate (0–20)'),
  maxTokens: positiveInt.optional().describe('response token limit'),
  timeoutMs: positiveInt.optional().describe('per-attempt timeout in ms'),
  maxRetries: z.number().int().min(0).optional().describe('retries after the first attempt'),
  coordModel: z
    .enum(['ui-tars-1.5', 'ui-tars'])
    .optional()
    .describe('"ui-tars-1.5": absolute pixels of the smart-resized screenshot; "ui-tars": the 0–1000 relative grid'),
  minPixels: positiveInt.optional().describe('smart-resize lower bound in pixels (Qwen default 100·28² = 78400)'),
  maxPixels: positiveInt.optional().describe('smart-resize upper bound in pixels (Qwen default 16384·28² = 12845056)'),
  resizeScreenshots: z
    .boolean()
    .optional()
    .describe('smart-resize screenshots before sending them (true), or leave it to the server (false)'),
  maxImages: positiveInt.optional().describe('screenshots kept in the context (DART: 5)'),
  maxTexts: positiveInt.optional().describe('past assistant turns kept in the context (DART: 35)'),
  logitBias: z
    .record(z.string().regex(/^\d+$/, 'keys are token ids'), z.number().min(-100).max(100))
    .optional()
    .describe(
      'token id → bias added to its logit (OpenAI logit_bias), e.g. -100 on vision special tokens a small model must never answer with (the trainer cannot re-score them)'
    ),
  language: z.string().min(1).optional().describe('language of the Thought part (DART: English)'),
  callUser: z.boolean().optional().describe('list call_user() in the prompt'),
  password: z
    .string()
    .nullable()
    .optional()
    .describe("the machine's password named in the prompt for sudo tasks; null leaves the note out"),
});
