/**
 * The contract between the front and vLLM's /v1/chat/completions, both ways: what every forwarded
 * request is forced to ask for (per-token logprobs as token ids, the served model), and what an answer
 * must contain before it reaches an episode (choices, one finite logprob per generated token, each token
 * a `token_id:N`). An answer that breaks it is a MalformedAnswerError, which the front reports as 502 and
 * the episode policy as an infrastructure failure: a step without behaviour logprobs cannot be trained
 * with truncated importance sampling, and must never be recorded as a reward.
 */
import { z } from 'zod';
import type { Served } from './serving-gate';

export class InvalidChatRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidChatRequestError';
  }
}

export class MalformedAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswerError';
  }
}

/** The request body to send to vLLM: the client's, with the fields dartflow depends on forced. */
export function prepareChatRequest(raw: unknown, served: Served): Record<string, unknown> {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new InvalidChatRequestError('the body must be a JSON object');
  const body = raw as Record<string, unknown>;
  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw new InvalidChatRequestError('"messages" must be a non-empty array');
  // Streaming would hand out tokens before the answer can be validated and stamped.
  if (body.stream === true) throw new InvalidChatRequestError('"stream": true is not supported by the dartflow front');
  return {
    ...body,
    // Whatever name the client used: the front knows which weights or adapter are current.
    model: served.model,
    logprobs: true,
    // Token ids, not text pieces: partial UTF-8 bytes come back as "" otherwise, and the trainer
    // re-scores exactly these ids.
    return_tokens_as_token_ids: true,
  };
}

const TOKEN_ID = /^token_id:(\d+)$/;

const LogprobEntry = z.object({
  token: z.string().regex(TOKEN_ID, 'a token of the form token_id:N'),
  logprob: z.number().refine(Number.isFinite, 'a finite number'),
});
const AnswerSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullable() }),
        logprobs: z.object({ content: z.array(LogprobEntry).min(1, 'at least one generated token') }),
        finish_reason: z.string().nullable().optional(),
      })
    )
    .min(1),
});

/** Throws MalformedAnswerError (naming the first problem) unless `json` is a usable chat completion. */
export function validateChatAnswer(json: unknown): void {
  const r = AnswerSchema.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new MalformedAnswerError(`vLLM answer at "${i?.path.join('.') ?? ''}": ${i?.message ?? 'invalid'}`);
  }
}

/** Adds the version that served the answer: `dartflow_version`, `dartflow_campaign`, `dartflow_server`, and a model name ending in v<N>. */
export function stampAnswer(json: Record<string, unknown>, served: Served, serverId: string): Record<string, unknown> {
  return {
    ...json,
    // "<name>/v<N>": clients that read the version from the model name (vlm/uitars-policy.ts) get it right too.
    model: `${String(json.model ?? 'dartflow')}/v${served.version}`,
    dartflow_version: served.version,
    dartflow_campaign: served.campaignId,
    dartflow_server: serverId,
  };
}
