/**
 * Client side of the policy servers, used by env workers: least-loaded routing across endpoints (by this
 * process's in-flight requests to each), retries with jittered exponential backoff, a per-request
 * timeout, and a short cool-down for an endpoint that just failed so the retry goes elsewhere at once.
 * When every attempt fails the caller gets PolicyUnavailableError (a retryable infrastructure failure
 * of the episode, never a reward). Every answer names its policyVersion and serverId. Observations
 * encoded by the caller (EncodedImage) travel as a binary body, so the server parses no big strings.
 */
import { PolicyUnavailableError } from '../activities/env/policy';
import {
  MAX_REQUESTS_PER_CALL,
  ActResponseSchema,
  ErrorBodySchema,
  HealthSchema,
  type ActAnswerWire,
  type Health,
} from './api';
import { packActCall, type OutgoingActRequest } from './act-wire';
import { backoffDelay, sleep, DEFAULT_BACKOFF, type BackoffOptions } from './backoff';
import { HttpAgents, httpExchange, HttpTimeoutError, type HttpAnswer } from './http-exchange';

export { PolicyUnavailableError };

export interface PolicyClientOptions {
  /** Base URLs of policy servers, e.g. http://127.0.0.1:8700. */
  endpoints: string[];
  token: string;
  /** Per attempt (DART: 10 s for a model call). */
  timeoutMs?: number;
  /** Attempts in total across all endpoints. */
  maxAttempts?: number;
  backoff?: BackoffOptions;
  /** How long an endpoint that failed is avoided while others are available. */
  cooldownMs?: number;
  rand?: () => number;
}

export interface PolicyAnswer extends ActAnswerWire {
  /** The endpoint that answered. */
  endpoint: string;
  attempts: number;
}

/** The server understood the request and refused it (HTTP 4xx other than 401): retrying cannot help. */
export class PolicyRequestError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The server's error code (e.g. `input_size_mismatch`), when it sent one. */
    readonly code?: string
  ) {
    super(message);
    this.name = 'PolicyRequestError';
  }
}

class AttemptError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number
  ) {
    super(message);
  }
}

interface EndpointState {
  url: string;
  inFlight: number;
  downUntil: number;
  failures: number;
}

export class PolicyServerClient {
  private readonly states: EndpointState[];
  private rr = 0;
  /** Keep-alive sockets to the endpoints, shared by every call of this client. */
  private readonly agents = new HttpAgents();
  private readonly opts: Required<Omit<PolicyClientOptions, 'rand'>> & { rand: () => number };

  constructor(opts: PolicyClientOptions) {
    if (opts.endpoints.length === 0) throw new Error('PolicyServerClient: no policy server endpoints');
    this.opts = {
      timeoutMs: 10_000,
      maxAttempts: 6,
      backoff: DEFAULT_BACKOFF,
      cooldownMs: 2_000,
      rand: Math.random,
      ...opts,
    };
    this.states = [...new Set(opts.endpoints.map((u) => u.replace(/\/+$/, '')))].map((url) => ({
      url,
      inFlight: 0,
      downUntil: 0,
      failures: 0,
    }));
  }

  get endpoints(): string[] {
    return this.states.map((s) => s.url);
  }

  /** Requests in flight from this client, per endpoint. */
  load(): Record<string, number> {
    return Object.fromEntries(this.states.map((s) => [s.url, s.inFlight]));
  }

  /**
   * Least in-flight first, among endpoints not cooling down (all of them if every one is). Ties rotate,
   * so an idle fleet still spreads requests instead of piling onto the first URL.
   */
  private pick(avoid?: EndpointState): EndpointState {
    const now = Date.now();
    let pool = this.states.filter((s) => s.downUntil <= now && s !== avoid);
    if (pool.length === 0) pool = this.states.filter((s) => s !== avoid);
    if (pool.length === 0) pool = this.states;
    const least = Math.min(...pool.map((s) => s.inFlight));
    const tied = pool.filter((s) => s.inFlight === least);
    const chosen = tied[this.rr % tied.length]!;
    this.rr = (this.rr + 1) % 1_000_000;
    return chosen;
  }

  /** GET when `body` is undefined; a string body is sent as JSON, a packed act call with its own type. */
  private async post(
    ep: EndpointState,
    path: string,
    body: { body: Uint8Array | string; contentType: string } | undefined,
    signal?: AbortSignal
  ): Promise<unknown> {
    let res: HttpAnswer;
    try {
      res = await httpExchange(
        `${ep.url}${path}`,
        {
          method: body === undefined ? 'GET' : 'POST',
          headers: {
            authorization: `Bearer ${this.opts.token}`,
            ...(body === undefined ? {} : { 'content-type': body.contentType }),
          },
          ...(body === undefined ? {} : { body: body.body }),
          timeoutMs: this.opts.timeoutMs,
          signal,
        },
        this.agents
      );
    } catch (err) {
      if (signal?.aborted) throw err;
      const code = (err as { code?: string }).code;
      const why =
        err instanceof HttpTimeoutError
          ? `timed out after ${this.opts.timeoutMs} ms`
          : `${(err as Error).message}${code && !(err as Error).message.includes(code) ? ` (${code})` : ''}`;
      throw new AttemptError(`${ep.url}: ${why}`, true);
    }
    const text = res.text;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AttemptError(`${ep.url}: HTTP ${res.status}, answer is not JSON`, true, res.status);
    }
    if (res.status < 200 || res.status >= 300) {
      const e = ErrorBodySchema.safeParse(json);
      const msg = `${ep.url}: HTTP ${res.status} ${e.success ? `${e.data.code}: ${e.data.error}` : text.slice(0, 200)}`;
      // 401: this endpoint has another token (a config problem there); other endpoints may still work.
      if (res.status === 401) throw new AttemptError(msg, true, 401);
      if (res.status >= 400 && res.status < 500 && res.status !== 429)
        throw new PolicyRequestError(msg, res.status, e.success ? e.data.code : undefined);
      throw new AttemptError(msg, e.success ? e.data.retryable : true, res.status);
    }
    return json;
  }

  /**
   * The served policy's input side S from the latest answer (undefined until one arrived, or when the
   * server is too old to say): senders that know it can send `encoded` observations (the fast path).
   */
  get inputSize(): number | undefined {
    return this.learnedInputSize;
  }

  private learnedInputSize: number | undefined;

  /** One act request with routing, retries and failover. */
  async act(request: OutgoingActRequest, signal?: AbortSignal): Promise<PolicyAnswer> {
    return (await this.actMany([request], signal))[0]!;
  }

  /**
   * Several act requests in one HTTP call (at most MAX_REQUESTS_PER_CALL): the server batches them
   * together, and the per-call costs (HTTP, routing) are paid once. All succeed or fail together:
   * one malformed request fails the call with PolicyRequestError.
   */
  async actMany(requests: OutgoingActRequest[], signal?: AbortSignal): Promise<PolicyAnswer[]> {
    if (requests.length === 0) return [];
    if (requests.length > MAX_REQUESTS_PER_CALL)
      throw new RangeError(`actMany: ${requests.length} requests; at most ${MAX_REQUESTS_PER_CALL} per call`);
    // Packed once: encoded tensors travel as binary, everything else as JSON (rollout/api.ts).
    const body = packActCall(requests);
    const errors: string[] = [];
    let avoid: EndpointState | undefined;
    for (let attempt = 0; attempt < this.opts.maxAttempts; attempt++) {
      const ep = this.pick(avoid);
      ep.inFlight += requests.length;
      try {
        const json = await this.post(ep, '/v1/act', body, signal);
        const parsed = ActResponseSchema.safeParse(json);
        if (!parsed.success || parsed.data.answers.length !== requests.length)
          throw new AttemptError(`${ep.url}: malformed act answer`, true);
        if (parsed.data.inputSize !== undefined) this.learnedInputSize = parsed.data.inputSize;
        ep.failures = 0;
        ep.downUntil = 0;
        return parsed.data.answers.map((a) => ({ ...a, endpoint: ep.url, attempts: attempt + 1 }));
      } catch (err) {
        if (!(err instanceof AttemptError)) throw err;
        errors.push(err.message);
        ep.failures += 1;
        ep.downUntil = Date.now() + this.opts.cooldownMs;
        avoid = ep;
        if (!err.retryable) break;
        if (attempt + 1 < this.opts.maxAttempts) {
          // Fail over to another endpoint immediately; back off only when the fleet looks down.
          const othersUp = this.states.some((s) => s !== ep && s.downUntil <= Date.now());
          if (!othersUp) await sleep(backoffDelay(attempt, this.opts.backoff, this.opts.rand), signal);
        }
      } finally {
        ep.inFlight -= requests.length;
      }
    }
    throw new PolicyUnavailableError(
      `no policy server answered after ${errors.length} attempts: ${errors.slice(-3).join(' | ')}`
    );
  }

  /** Health of one endpoint (no retries; for dashboards and tests). */
  async health(url: string, signal?: AbortSignal): Promise<Health> {
    const ep = this.states.find((s) => s.url === url.replace(/\/+$/, '')) ?? {
      url,
      inFlight: 0,
      downUntil: 0,
      failures: 0,
    };
    return HealthSchema.parse(await this.post(ep, '/v1/health', undefined, signal));
  }
}
