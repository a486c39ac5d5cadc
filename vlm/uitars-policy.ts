/**
 * UI-TARS served by vLLM (or any OpenAI-compatible server) as an EpisodePolicy. Per episode it keeps the
 * screenshots and its own answers, sends the UI-TARS context (vlm/prompt.ts: last 5 screenshots), and
 * turns the answer into a canonical action with the env helper's UI-TARS parser (actions/uitars.ts).
 *
 * A response that does not parse is a failed action (action null, parseError set, the raw text kept as
 * actionText), never an exception; only transport failures after all retries raise
 * PolicyUnavailableError. The behaviour log-prob is over the whole response (thought + action tokens),
 * because that is the sequence the model sampled and the trainer re-scores.
 */
import {
  PolicyUnavailableError,
  type EpisodePolicy,
  type PolicyDecision,
  type PolicyFactory,
} from '../activities/env/policy';
import { parseUiTarsResponse, uiTarsCoordSpace, type UiTarsModel } from '../actions/uitars';
import { chatCompletion, ChatCompletionError, type ChatClientOptions } from './chat-client';
import { summarizeLogprobs } from './logprobs';
import { buildMessages, DART_CONTEXT_LIMITS, type ContextLimits, type VlmTurn } from './prompt';

export interface UiTarsPolicyOptions extends ChatClientOptions {
  /** Coordinate convention of the model: UI-TARS-1.5 writes smart-resized pixels, UI-TARS 0–1000. */
  coordModel?: UiTarsModel;
  limits?: ContextLimits;
  language?: string;
  /**
   * The model version recorded in each step. vLLM answers with the model name it was started with
   * (DART: the checkpoint path); by default a trailing "v<N>" / "-<N>" / "step<N>" in it is the version,
   * else `defaultVersion`.
   */
  versionOf?: (model: string) => number;
  defaultVersion?: number;
}

export function versionFromModelName(model: string, fallback = 0): number {
  const m = /(?:^|[-_/])(?:v|step|checkpoint|ckpt)?[-_]?(\d+)\/?$/i.exec(model);
  return m ? Number(m[1]) : fallback;
}

export function createUiTarsPolicy(opts: UiTarsPolicyOptions): EpisodePolicy {
  const turns: VlmTurn[] = [];
  let instruction: string | undefined;
  let calls = 0;
  return {
    async act(obs, { seed, temperature }): Promise<PolicyDecision> {
      instruction ??= obs.instruction;
      turns.push({ pngBase64: Buffer.from(obs.png.buffer, obs.png.byteOffset, obs.png.byteLength).toString('base64') });
      const messages = buildMessages(instruction, turns, opts.limits ?? DART_CONTEXT_LIMITS, opts.language);
      let result;
      try {
        // Start each call on the next endpoint so an episode's steps spread over the replicas.
        result = await chatCompletion(opts, { messages, temperature, seed }, calls++);
      } catch (err) {
        if (err instanceof ChatCompletionError)
          throw new PolicyUnavailableError(`UI-TARS endpoint failed: ${err.message}`);
        throw err;
      }
      const turn = turns[turns.length - 1]!;
      turn.response = result.text;
      const { logProb, tokenLogProbs, entropy } = summarizeLogprobs(result.tokens);
      const policyVersion = opts.versionOf
        ? opts.versionOf(result.model)
        : versionFromModelName(result.model, opts.defaultVersion ?? 0);
      const base = {
        actionText: result.text,
        logProb,
        tokenLogProbs,
        entropy,
        policyVersion,
        policyServer: result.baseUrl,
      };
      const parsed = parseUiTarsResponse(
        result.text,
        uiTarsCoordSpace({ width: obs.width, height: obs.height }, opts.coordModel ?? 'ui-tars-1.5')
      );
      if (!parsed.ok) return { ...base, action: null, parseError: `${parsed.error.code}: ${parsed.error.message}` };
      return { ...base, action: parsed.action };
    },
  };
}

/**
 * Factory for runEpisode's `policy.kind: 'uitars'`: ctx.endpoints are OpenAI-compatible base URLs
 * (…/v1); ctx.options may set model, topLogprobs, maxTokens, timeoutMs, maxRetries, coordModel.
 */
export function uiTarsPolicyFactory(defaults: Partial<UiTarsPolicyOptions> = {}): PolicyFactory {
  return (ctx) => {
    const o = ctx.options;
    const pick = <T>(v: unknown, guard: (x: unknown) => x is T): T | undefined => (guard(v) ? v : undefined);
    const isNum = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
    const isStr = (x: unknown): x is string => typeof x === 'string' && x.length > 0;
    const model = pick(o.model, isStr) ?? defaults.model;
    if (!model) throw new Error('uitars policy: options.model (the served model name) is required');
    const baseUrls = ctx.endpoints.length ? ctx.endpoints : (defaults.baseUrls ?? []);
    if (baseUrls.length === 0) throw new Error('uitars policy: no endpoint (policy.endpoints)');
    const coord = pick(o.coordModel, (x): x is UiTarsModel => x === 'ui-tars' || x === 'ui-tars-1.5');
    const num = (k: string, d: number | undefined) => pick(o[k], isNum) ?? d;
    const topLogprobs = num('topLogprobs', defaults.topLogprobs);
    const maxTokens = num('maxTokens', defaults.maxTokens);
    const timeoutMs = num('timeoutMs', defaults.timeoutMs);
    const maxRetries = num('maxRetries', defaults.maxRetries);
    return createUiTarsPolicy({
      ...defaults,
      model,
      baseUrls,
      ...(coord ? { coordModel: coord } : {}),
      ...(topLogprobs !== undefined ? { topLogprobs } : {}),
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(maxRetries !== undefined ? { maxRetries } : {}),
      ...(ctx.versionHint !== undefined && defaults.defaultVersion === undefined
        ? { defaultVersion: ctx.versionHint }
        : {}),
    });
  };
}
