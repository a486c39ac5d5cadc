/**
 * UI-TARS demonstrations for a VLM campaign's behaviour-cloning warm start (`policy.kind: 'uitars-oracle'`).
 * The task page's oracle (activities/env/policies/oracle.ts) decides the action; this policy turns each
 * decision into the UI-TARS turn the VLM should have produced, with the prompt the VLM would have been
 * given:
 * - the screenshot is prepared exactly as the UI-TARS policy prepares it (smart-resize with the same
 *   bounds, vlm/uitars-policy.ts `screenshotAsSent`) and the messages are built by the same
 *   `buildMessages` with the same context limits and prompt options, the past demonstrated turns as
 *   history; the prompt record (vlm/prompt-record.ts) is returned the same way, so the env activity
 *   stores it and the step names it (`promptKey`);
 * - the response is `Thought: <thought>\nAction: <action>` in the configured coordinate convention
 *   (`coordModel`: smart-resized pixels for UI-TARS-1.5, 0–1000 for UI-TARS), points written without box
 *   tokens as the model writes them (the history adds them, DART's add_box_token);
 * - the action that runs is the rendered text parsed back, so the demonstration is exactly what the
 *   text says (coordinates rounded to the convention's grid); a text that does not parse back is a bug
 *   and throws.
 *
 * No token ids: the Python trainer tokenizes a demonstration's `actionText` with the model's own
 * tokenizer (the base-model folder the vLLM servers start from) and ends it with `<|im_end|>`
 * (python/dartflow_vlm/samples.py `demo_token_ids`). That is the same tokenizer vLLM's /tokenize would
 * use, needs no vLLM server during the demonstrations, and keeps the env side free of tokenizers.
 * No logprobs either (a demonstration is not a sample of the policy): `logProb` 0, none per token.
 */
import { createOraclePolicy } from '../activities/env/policies/oracle';
import type { EpisodePolicy, PolicyDecision, PolicyFactory } from '../activities/env/policy';
import { parseUiTarsResponse, renderUiTarsResponse } from '../actions/uitars';
import { parseUiTarsOptions } from './policy-options';
import { buildMessages, DART_CONTEXT_LIMITS, type VlmTurn } from './prompt';
import { promptRecordObject } from './prompt-record';
import {
  coordSpaceOf,
  screenshotAsSent,
  uiTarsContextSettings,
  type UiTarsContextSettings,
  type UiTarsPolicyOptions,
} from './uitars-policy';

export const UITARS_ORACLE_SERVER = 'uitars-oracle';

export interface UiTarsOracleOptions extends UiTarsContextSettings {
  /** The Thought part of every demonstrated turn (the oracle gives no reasons). Default: empty. */
  thought?: string;
}

export function createUiTarsOraclePolicy(oracle: EpisodePolicy, opts: UiTarsOracleOptions = {}): EpisodePolicy {
  const turns: VlmTurn[] = [];
  let instruction: string | undefined;
  return {
    async act(obs, actOpts): Promise<PolicyDecision> {
      instruction ??= obs.instruction;
      const { png, seen } = screenshotAsSent(obs, opts.resize ?? {}, opts.resizeScreenshots);
      const turn: VlmTurn = { pngBase64: png.toString('base64') };
      turns.push(turn);
      const messages = buildMessages(instruction, turns, opts.limits ?? DART_CONTEXT_LIMITS, opts.prompt);
      const prompt = promptRecordObject(messages);
      const decided = await oracle.act(obs, actOpts);
      if (!decided.action) throw new Error('uitars-oracle: the oracle gave no action');
      const space = coordSpaceOf(opts.coordModel, seen);
      const text = renderUiTarsResponse(decided.action, space, opts.thought ?? '', { boxTokens: false });
      const parsed = parseUiTarsResponse(text, space);
      if (!parsed.ok) {
        throw new Error(
          `uitars-oracle: the demonstration ${JSON.stringify(text)} does not parse back: ${parsed.error.message}`
        );
      }
      turn.response = text;
      return {
        action: parsed.action,
        actions: parsed.canonicalActions,
        actionText: text,
        logProb: 0,
        entropy: 0,
        policyVersion: 0,
        policyServer: UITARS_ORACLE_SERVER,
        prompt,
      };
    },
  };
}

/**
 * Factory for `policy.kind: 'uitars-oracle'`: ctx.options are the UI-TARS policy's (vlm/policy-options.ts;
 * the ones that shape the prompt and coordinates apply: coordModel, minPixels, maxPixels,
 * resizeScreenshots, maxImages, maxTexts, language, callUser, password), over the same worker defaults as
 * the `uitars` kind, so a demonstration's prompt is the one the VLM is sampled with. Clicks are the
 * oracle's exact points (not snapped to the embedded policy's grid). No endpoints are needed.
 */
export function uiTarsOraclePolicyFactory(
  defaults: Partial<UiTarsPolicyOptions> = {},
  extra: { thought?: string } = {}
): PolicyFactory {
  return (ctx) => {
    const settings = uiTarsContextSettings(parseUiTarsOptions(ctx.options), defaults);
    return createUiTarsOraclePolicy(createOraclePolicy(ctx, { grid: false }), {
      ...settings,
      ...(extra.thought !== undefined ? { thought: extra.thought } : {}),
    });
  };
}
