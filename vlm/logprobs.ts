/**
 * Per-token logprobs of an OpenAI-compatible chat completion → the step's behaviour log-probability and
 * its mean token entropy.
 *
 * Behaviour log-probability: the sum of the sampled tokens' logprobs (the log-probability of the whole
 * response under the serving model), which is what truncated importance sampling divides by.
 *
 * Entropy estimator (the true per-token entropy needs the full vocabulary, the API returns the top k):
 *   H_t ≈ −Σ_{i≤k} p_i·log p_i − r·log r,  with r = max(0, 1 − Σ_{i≤k} p_i),
 * i.e. the top-k alternatives exactly, plus all remaining mass lumped into one bucket. Lumping can only
 * lower entropy, so this is a lower bound of H_t that is exact when the top k cover the mass, is finite
 * without knowing the vocabulary size, and ranks steps consistently (all DART needs: it keeps the
 * top-80% steps by entropy). If a token comes without alternatives, the sampled token stands in as the
 * only known entry. The step's entropy is the mean over its tokens.
 *
 * Note on vLLM: depending on its version/`logprobs_mode`, returned logprobs are of the raw model
 * distribution (before temperature); the trainer must use the same convention when it recomputes π_old.
 */

export interface TopLogprob {
  token: string;
  logprob: number;
}

export interface TokenLogprob {
  token: string;
  logprob: number;
  top_logprobs?: TopLogprob[];
}

export interface LogprobSummary {
  logProb: number;
  tokenLogProbs: number[];
  entropy: number;
}

/** vLLM returns −inf (as -9999 or a very negative float) for impossible tokens; clamp to stay finite. */
const FLOOR = -1e4;
const clampLp = (lp: number): number => (Number.isFinite(lp) ? Math.max(FLOOR, Math.min(0, lp)) : FLOOR);

export function tokenEntropy(tok: TokenLogprob): number {
  const alts =
    tok.top_logprobs && tok.top_logprobs.length > 0 ? tok.top_logprobs : [{ token: tok.token, logprob: tok.logprob }];
  // Duplicate tokens (some servers repeat the sampled one) must not count twice.
  const seen = new Map<string, number>();
  for (const a of alts) if (!seen.has(a.token)) seen.set(a.token, clampLp(a.logprob));
  let mass = 0;
  let h = 0;
  for (const lp of seen.values()) {
    const p = Math.exp(lp);
    mass += p;
    if (p > 0) h -= p * lp;
  }
  const rest = Math.max(0, 1 - mass);
  if (rest > 0) h -= rest * Math.log(rest);
  return Math.max(0, h);
}

export function summarizeLogprobs(tokens: readonly TokenLogprob[]): LogprobSummary {
  const tokenLogProbs = tokens.map((t) => clampLp(t.logprob));
  const logProb = tokenLogProbs.reduce((a, b) => a + b, 0);
  const entropy = tokens.length ? tokens.reduce((a, t) => a + tokenEntropy(t), 0) / tokens.length : 0;
  return { logProb, tokenLogProbs, entropy };
}

const TOKEN_ID = /^token_id:(\d+)$/;

/**
 * The generated token ids, when every token came as `token_id:N` (the dartflow front forces vLLM's
 * `return_tokens_as_token_ids`; a bare vLLM does it with `--return-tokens-as-token-ids`); undefined when
 * any token is a text piece (those cannot be mapped back to ids reliably, so the step is not re-scorable).
 */
export function tokenIdsOf(tokens: readonly TokenLogprob[]): number[] | undefined {
  const ids: number[] = [];
  for (const t of tokens) {
    const m = TOKEN_ID.exec(t.token);
    if (!m) return undefined;
    ids.push(Number(m[1]));
  }
  return ids.length ? ids : undefined;
}
