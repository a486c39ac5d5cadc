/**
 * UI-TARS served by vLLM (or any OpenAI-compatible server) as an EpisodePolicy. Per episode it keeps the
 * screenshots and its own answers, sends DART's UI-TARS context (vlm/prompt.ts: the computer-use prompt,
 * the last 5 screenshots, past Thought/Action turns), and turns the answer into canonical actions with
 * the UI-TARS parser (actions/uitars.ts).
 *
 * Screenshots are smart-resized before they are sent (vlm/screenshot.ts) with the same pixel bounds the
 * coordinate space is computed from, so UI-TARS-1.5's absolute pixels map back exactly; the 0–1000
 * convention (`coordModel: 'ui-tars'`) is resolution-free.
 *
 * A response that does not parse is a failed action (action null, parseError set, the raw text kept as
 * actionText), never an exception; only transport failures after all retries raise
 * PolicyUnavailableError. The behaviour log-prob is over the whole response (thought + action tokens),
 * because that is the sequence the model sampled and the trainer re-scores.
 *
 * Each decision also carries what the VLM trainer re-scores from: `responseTokenIds` (when vLLM answered
 * with `token_id:N` tokens, as the dartflow front makes it) and `prompt`, the messages as sent
 * (vlm/prompt-record.ts), which the env activity stores content-addressed and names in the step record.
 *
 * A response with several actions: `action` is the first runnable one (what a one-action step loop
 * runs) and `actions` lists all runnable ones in order, for a step loop that runs them all within the
 * step (actions/sequence.ts).
 */
import {
  PolicyUnavailableError,
  type EpisodePolicy,
  type PolicyDecision,
  type PolicyFactory,
} from '../activities/env/policy';
import { smartResize, type SmartResizeOptions } from '../actions/smart-resize';
import { parseUiTarsResponse, type CoordSpace, type UiTarsModel } from '../actions/uitars';
import type { CanonicalAction } from '../schemas/actions';
import { sharedRouter } from '../rollout/vllm/router';
import { chatCompletion, ChatCompletionError, type ChatClientOptions } from './chat-client';
import { summarizeLogprobs, tokenIdsOf } from './logprobs';
import { parseUiTarsOptions, UiTarsOptionsError, type UiTarsOptionsInput } from './policy-options';
import { buildMessages, DART_CONTEXT_LIMITS, type ContextLimits, type PromptOptions, type VlmTurn } from './prompt';
import { promptRecordObject } from './prompt-record';
import { smartResizePng } from './screenshot';

export interface UiTarsPolicyOptions extends ChatClientOptions {
  /** Coordinate convention of the model: UI-TARS-1.5 writes smart-resized pixels, UI-TARS 0–1000. */
  coordModel?: UiTarsModel;
  /** Smart-resize bounds (factor 28; Qwen's defaults 100·28² … 16384·28² pixels). */
  resize?: SmartResizeOptions;
  /** Resize screenshots on the client (default true); false leaves it to the server's processor. */
  resizeScreenshots?: boolean;
  limits?: ContextLimits;
  prompt?: PromptOptions;
  /**
   * The model version recorded in each step. A dartflow VLM front says it (`dartflow_version`, which
   * always wins); a bare vLLM answers with the model name it was started with (DART: the checkpoint
   * path), where by default a trailing "v<N>" / "-<N>" / "step<N>" is the version, else `defaultVersion`.
   */
  versionOf?: (model: string) => number;
  defaultVersion?: number;
}

/** A decision that also carries every runnable action of a multi-action response. */
export type UiTarsDecision = PolicyDecision & { actions?: CanonicalAction[] };

export function versionFromModelName(model: string, fallback = 0): number {
  const m = /(?:^|[-_/])(?:v|step|checkpoint|ckpt)?[-_]?(\d+)\/?$/i.exec(model);
  return m ? Number(m[1]) : fallback;
}

/**
 * The screenshot as the model receives it and the size its pixels are in: smart-resized on the client
 * (default), or the original PNG with the size the server's processor will resize it to.
 */
export function screenshotAsSent(
  obs: { png: Uint8Array; width: number; height: number },
  resize: SmartResizeOptions,
  resizeScreenshots: boolean | undefined
): { png: Buffer; seen: { width: number; height: number } } {
  if (resizeScreenshots !== false) {
    const r = smartResizePng(obs.png, resize);
    return { png: r.png, seen: { width: r.width, height: r.height } };
  }
  return {
    png: Buffer.from(obs.png.buffer, obs.png.byteOffset, obs.png.byteLength),
    seen: smartResize(obs.height, obs.width, resize),
  };
}

/** The coordinate convention of a model's answers: 0–1000 (`ui-tars`) or pixels of the image it saw. */
export function coordSpaceOf(coordModel: UiTarsModel | undefined, seen: { width: number; height: number }): CoordSpace {
  return coordModel === 'ui-tars' ? { kind: 'relative1000' } : { kind: 'absolute', ...seen };
}

export function createUiTarsPolicy(opts: UiTarsPolicyOptions): EpisodePolicy {
  const turns: VlmTurn[] = [];
  let instruction: string | undefined;
  let calls = 0;
  const resize = opts.resize ?? {};
  // Least-loaded across replicas, shared by every episode of this process; one endpoint needs no routing.
  const router = opts.router ?? (opts.baseUrls.length > 1 ? sharedRouter(opts.baseUrls, opts.apiKey) : undefined);
  const chatOpts = router ? { ...opts, router } : opts;
  return {
    async act(obs, { seed, temperature }): Promise<PolicyDecision> {
      instruction ??= obs.instruction;
      const { png, seen } = screenshotAsSent(obs, resize, opts.resizeScreenshots);
      turns.push({ pngBase64: png.toString('base64') });
      const messages = buildMessages(instruction, turns, opts.limits ?? DART_CONTEXT_LIMITS, opts.prompt);
      // Serialized before the call: the record is the request's messages, whatever happens to `turns` later.
      const prompt = promptRecordObject(messages);
      let result;
      try {
        // Without a router, start each call on the next endpoint so an episode's steps spread over replicas.
        result = await chatCompletion(chatOpts, { messages, temperature, seed }, calls++);
      } catch (err) {
        if (err instanceof ChatCompletionError)
          throw new PolicyUnavailableError(`UI-TARS endpoint failed: ${err.message}`);
        throw err;
      }
      const turn = turns[turns.length - 1]!;
      turn.response = result.text;
      const { logProb, tokenLogProbs, entropy } = summarizeLogprobs(result.tokens);
      const policyVersion =
        result.version ??
        (opts.versionOf ? opts.versionOf(result.model) : versionFromModelName(result.model, opts.defaultVersion ?? 0));
      // What the trainer re-scores: vLLM's token ids and the messages exactly as sent (docs/vlm.md).
      const responseTokenIds = tokenIdsOf(result.tokens);
      const base = {
        actionText: result.text,
        logProb,
        tokenLogProbs,
        entropy,
        policyVersion,
        policyServer: result.baseUrl,
        ...(responseTokenIds ? { responseTokenIds } : {}),
        prompt,
      };
      const space = coordSpaceOf(opts.coordModel, seen);
      const parsed = parseUiTarsResponse(result.text, space);
      if (!parsed.ok) return { ...base, action: null, parseError: `${parsed.error.code}: ${parsed.error.message}` };
      const decision: UiTarsDecision = { ...base, action: parsed.action, actions: parsed.canonicalActions };
      return decision;
    },
  };
}

const defined = <T extends object>(x: T): Partial<T> =>
  Object.fromEntries(Object.entries(x).filter(([, v]) => v !== undefined)) as Partial<T>;

/** What decides the prompt and the coordinates: the same for the UI-TARS policy and its demonstrations. */
export type UiTarsContextSettings = Pick<
  UiTarsPolicyOptions,
  'resize' | 'limits' | 'prompt' | 'coordModel' | 'resizeScreenshots'
>;

/** The episode's options over the worker's defaults (vlm/policy-options.ts validated `o`). */
export function uiTarsContextSettings(
  o: UiTarsOptionsInput,
  defaults: Partial<UiTarsPolicyOptions>
): UiTarsContextSettings {
  return {
    resize: { ...defaults.resize, ...defined({ minPixels: o.minPixels, maxPixels: o.maxPixels }) },
    limits: {
      ...DART_CONTEXT_LIMITS,
      ...defaults.limits,
      ...defined({ maxImages: o.maxImages, maxTexts: o.maxTexts }),
    },
    prompt: {
      ...defaults.prompt,
      ...defined({ language: o.language, callUser: o.callUser }),
      ...(o.password !== undefined ? { password: o.password } : {}),
    },
    ...defined({
      coordModel: o.coordModel ?? defaults.coordModel,
      resizeScreenshots: o.resizeScreenshots ?? defaults.resizeScreenshots,
    }),
  };
}

/**
 * Factory for runEpisode's `policy.kind: 'uitars'`: ctx.endpoints are OpenAI-compatible base URLs
 * (…/v1); ctx.options (validated by vlm/policy-options.ts) may set model, topLogprobs, maxTokens,
 * timeoutMs, maxRetries, coordModel, minPixels, maxPixels, resizeScreenshots, maxImages, maxTexts,
 * logitBias, language, callUser and password. A bad value is a UiTarsOptionsError naming the field.
 */
export function uiTarsPolicyFactory(defaults: Partial<UiTarsPolicyOptions> = {}): PolicyFactory {
  return (ctx) => {
    const o = parseUiTarsOptions(ctx.options);
    const model = o.model ?? defaults.model;
    if (!model) throw new UiTarsOptionsError('policy.options.model: missing; set it to the served model name');
    const baseUrls = ctx.endpoints.length ? ctx.endpoints : (defaults.baseUrls ?? []);
    if (baseUrls.length === 0) {
      throw new UiTarsOptionsError('policy.endpoints: empty; give the OpenAI-compatible base URLs (…/v1)');
    }
    return createUiTarsPolicy({
      ...defaults,
      model,
      baseUrls,
      ...uiTarsContextSettings(o, defaults),
      ...defined({
        topLogprobs: o.topLogprobs,
        maxTokens: o.maxTokens,
        timeoutMs: o.timeoutMs,
        maxRetries: o.maxRetries,
        logitBias: o.logitBias,
      }),
      ...(ctx.versionHint !== undefined && defaults.defaultVersion === undefined
        ? { defaultVersion: ctx.versionHint }
        : {}),
    });
  };
}
