/**
 * Minimal OpenAI-compatible chat-completions client (the subset vLLM serves): one POST per call,
 * per-attempt timeout, retries with jittered exponential backoff on network errors, timeouts, 429 and
 * 5xx (dart-spec.md §2.7: DART retries 5–10 times with 2^attempt s backoff). Other 4xx answers are the
 * request's fault and are not retried. A 200 without choices or without logprobs is a server
 * misconfiguration and is retried like a 5xx, then reported.
 *
 * With a `router` (rollout/vllm/router.ts) each attempt goes to the least-loaded endpoint not yet tried,
 * and an endpoint that fails in transport or with a 5xx is taken out of rotation for a while; without
 * one, attempts rotate through `baseUrls`. A dartflow VLM front stamps each answer with
 * `dartflow_version`, the model version that produced it (ChatResult.version).
 */
import { z } from 'zod';
import { backoffDelay, sleep, DEFAULT_BACKOFF, type BackoffOptions } from '../rollout/backoff';
import type { ChatMessage } from './prompt';
import type { TokenLogprob } from './logprobs';
import type { EndpointRouter } from '../rollout/vllm/router';

export interface ChatClientOptions {
  /** Base URL including the API prefix, e.g. http://127.0.0.1:8000/v1. One or more (tried in turn on failure). */
  baseUrls: string[];
  model: string;
  apiKey?: string;
  /** Alternatives per token for the entropy estimate (OpenAI caps it at 20). */
  topLogprobs?: number;
  maxTokens?: number;
  /** Per attempt (DART: 10 s in the GUI config, 100 s in the example config). */
  timeoutMs?: number;
  /** Attempts in total = maxRetries + 1. */
  maxRetries?: number;
  backoff?: BackoffOptions;
  /** OpenAI `logit_bias` (token id → bias) sent with every request. */
  logitBias?: Record<string, number>;
  /** Least-loaded endpoint choice and taking failing endpoints out (default: rotate through baseUrls). */
  router?: EndpointRouter;
}

export interface ChatRequest {
  messages: ChatMessage[];
  temperature: number;
  seed?: number;
  signal?: AbortSignal;
}

export interface ChatResult {
  text: string;
  tokens: TokenLogprob[];
  /** The "model" field of the answer: vLLM reports the checkpoint it was started from. */
  model: string;
  baseUrl: string;
  attempts: number;
  /** The model version that produced the answer, when the server says (a dartflow VLM front does). */
  version?: number;
}

/** The final failure after all retries (or a non-retryable HTTP answer). */
export class ChatCompletionError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number
  ) {
    super(message);
    this.name = 'ChatCompletionError';
  }
}

const TopSchema = z.object({ token: z.string(), logprob: z.number() });
const CompletionSchema = z.object({
  model: z.string().default(''),
  dartflow_version: z.number().int().nonnegative().optional(),
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullable().default('') }),
        logprobs: z
          .object({ content: z.array(TopSchema.extend({ top_logprobs: z.array(TopSchema).optional() })).nullable() })
          .nullable()
          .optional(),
      })
    )
    .min(1),
});

async function attempt(
  opts: ChatClientOptions,
  baseUrl: string,
  req: ChatRequest,
  clientId: string | undefined
): Promise<Omit<ChatResult, 'attempts'>> {
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? 100_000);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  const body = {
    model: opts.model,
    messages: req.messages,
    temperature: req.temperature,
    max_tokens: opts.maxTokens ?? 512,
    logprobs: true,
    top_logprobs: opts.topLogprobs ?? 5,
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    ...(opts.logitBias ? { logit_bias: opts.logitBias } : {}),
  };
  let res: Response;
  try {
    res = await fetch(`${baseUrl.replace(/\/+$/, '')}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
        // The front counts each client's requests, so a router's load report leaves its own out exactly.
        ...(clientId ? { 'x-dartflow-client': clientId } : {}),
      },
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (req.signal?.aborted) throw err;
    const why = timeout.aborted ? `timed out after ${opts.timeoutMs ?? 100_000} ms` : (err as Error).message;
    throw new ChatCompletionError(`${baseUrl}: ${why}`, true);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    if (req.signal?.aborted) throw err;
    throw new ChatCompletionError(
      `${baseUrl}: reading the answer failed (${timeout.aborted ? 'timeout' : (err as Error).message})`,
      true,
      res.status
    );
  }
  if (!res.ok) {
    const retryable = res.status === 429 || res.status >= 500;
    throw new ChatCompletionError(`${baseUrl}: HTTP ${res.status} ${text.slice(0, 300)}`, retryable, res.status);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ChatCompletionError(`${baseUrl}: answer is not JSON (${text.slice(0, 100)})`, true, res.status);
  }
  const parsed = CompletionSchema.safeParse(json);
  if (!parsed.success) {
    throw new ChatCompletionError(
      `${baseUrl}: not a chat completion (${parsed.error.issues[0]?.message ?? ''})`,
      true,
      res.status
    );
  }
  const choice = parsed.data.choices[0]!;
  const tokens = choice.logprobs?.content;
  if (!tokens || tokens.length === 0) {
    // Without per-token logprobs the step has no behaviour probability: importance sampling cannot use it.
    throw new ChatCompletionError(
      `${baseUrl}: the answer has no token logprobs (is the server started with logprobs enabled?)`,
      true,
      res.status
    );
  }
  const version = parsed.data.dartflow_version;
  return {
    text: choice.message.content ?? '',
    tokens,
    model: parsed.data.model,
    baseUrl,
    ...(version !== undefined ? { version } : {}),
  };
}

/** One completion with retries; rotates through `baseUrls` so a dead replica is skipped on the next try. */
export async function chatCompletion(opts: ChatClientOptions, req: ChatRequest, startIndex = 0): Promise<ChatResult> {
  if (opts.baseUrls.length === 0) throw new ChatCompletionError('no VLM endpoint configured', false);
  const tries = (opts.maxRetries ?? 5) + 1;
  let last: ChatCompletionError | undefined;
  const tried = new Set<string>();
  for (let i = 0; i < tries; i++) {
    const router = opts.router;
    const baseUrl = router ? await router.pick(tried) : opts.baseUrls[(startIndex + i) % opts.baseUrls.length]!;
    tried.add(baseUrl);
    router?.begin(baseUrl);
    try {
      return { ...(await attempt(opts, baseUrl, req, router?.clientId)), attempts: i + 1 };
    } catch (err) {
      if (!(err instanceof ChatCompletionError)) throw err;
      last = err;
      // A dead, failing or misconfigured server (not a busy one: 429) is taken out so other episodes
      // stop waiting on it.
      if (err.retryable && err.status !== 429) router?.markFailed(baseUrl, err.message);
      if (!err.retryable) throw err;
      if (i + 1 < tries) await sleep(backoffDelay(i, opts.backoff ?? DEFAULT_BACKOFF), req.signal);
    } finally {
      router?.end(baseUrl);
    }
  }
  throw new ChatCompletionError(
    `all ${tries} attempts failed; last: ${last?.message ?? 'unknown'}`,
    true,
    last?.status
  );
}
