/**
 * Shares HTTP calls between the concurrent episodes of one env worker. Each episode step asks for one
 * action; sent one per call, every action pays a whole HTTP exchange on both sides (in profiles of
 * 512 simulated envs, `fetch` was the env workers' largest item and request handling most of the policy
 * server's time outside the forward pass). Here at most `maxCallsInFlight` calls are outstanding; a
 * request that arrives while they are waits and leaves with the others queued meanwhile, in one call
 * (PolicyServerClient.actMany). So batching follows load: an idle worker sends each request at once
 * (no added latency, no timer), a busy one sends fewer, fuller calls.
 *
 * Failures stay per request: a call the server refuses as a whole (PolicyRequestError: one malformed or
 * mismatched observation) is resent request by request, so each caller gets its own answer or error.
 * A call that exhausted its retries (PolicyUnavailableError: no server answered) fails the requests
 * queued behind it too, instead of making them sit through the same retries one call after another.
 */
import { MAX_REQUESTS_PER_CALL } from './api';
import type { OutgoingActRequest } from './act-wire';
import { PolicyRequestError, PolicyUnavailableError, type PolicyAnswer, type PolicyServerClient } from './client';

export interface ActCoalescerOptions {
  /** Calls outstanding at once; requests arriving meanwhile share the next call. Default 2 per endpoint. */
  maxCallsInFlight?: number;
  /** Requests in one call (at most MAX_REQUESTS_PER_CALL). Default 32, a policy server's usual maxBatch. */
  maxPerCall?: number;
}

interface Waiting {
  request: OutgoingActRequest;
  resolve: (answer: PolicyAnswer) => void;
  reject: (err: unknown) => void;
  /** Set once the caller has its answer, an error, or gave up (aborted): later outcomes are ignored. */
  settled: boolean;
  /** Removes the caller's abort listener. */
  cleanup?: () => void;
}

export interface ActCoalescerStats {
  /** HTTP calls sent (a request resent alone after its call was refused counts again). */
  calls: number;
  /** Requests answered or failed. */
  requests: number;
}

export class ActCoalescer {
  private readonly queue: Waiting[] = [];
  private inFlight = 0;
  private readonly maxCallsInFlight: number;
  private readonly maxPerCall: number;
  private readonly counts: ActCoalescerStats = { calls: 0, requests: 0 };

  constructor(
    readonly client: PolicyServerClient,
    opts: ActCoalescerOptions = {}
  ) {
    this.maxCallsInFlight = opts.maxCallsInFlight ?? 2 * client.endpoints.length;
    this.maxPerCall = opts.maxPerCall ?? 32;
    if (!Number.isInteger(this.maxCallsInFlight) || this.maxCallsInFlight < 1)
      throw new RangeError(`ActCoalescer: maxCallsInFlight must be an integer ≥ 1, got ${this.maxCallsInFlight}`);
    if (!Number.isInteger(this.maxPerCall) || this.maxPerCall < 1 || this.maxPerCall > MAX_REQUESTS_PER_CALL)
      throw new RangeError(
        `ActCoalescer: maxPerCall must be an integer in 1…${MAX_REQUESTS_PER_CALL}, got ${this.maxPerCall}`
      );
  }

  /** The served input size, as the client learned it (see PolicyServerClient.inputSize). */
  get inputSize(): number | undefined {
    return this.client.inputSize;
  }

  /** Calls sent and requests settled so far (for tests and benchmarks). */
  stats(): ActCoalescerStats {
    return { ...this.counts };
  }

  /** One action, sent alone or with other requests waiting at the same time. */
  act(request: OutgoingActRequest, signal?: AbortSignal): Promise<PolicyAnswer> {
    signal?.throwIfAborted();
    return new Promise<PolicyAnswer>((resolve, reject) => {
      const w: Waiting = { request, resolve, reject, settled: false };
      if (signal) {
        const onAbort = () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) this.queue.splice(i, 1);
          this.settle(w, () => reject(signal.reason));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        // Dropped once settled, so a long-lived signal does not collect one listener per step.
        w.cleanup = () => signal.removeEventListener('abort', onAbort);
      }
      this.queue.push(w);
      this.pump();
    });
  }

  private settle(w: Waiting, outcome: () => void): void {
    if (w.settled) return;
    w.settled = true;
    w.cleanup?.();
    this.counts.requests += 1;
    outcome();
  }

  /** Sends calls while fewer than maxCallsInFlight are out (a full call goes regardless: waiting cannot fill it more). */
  private pump(): void {
    while (this.queue.length > 0 && (this.inFlight < this.maxCallsInFlight || this.queue.length >= this.maxPerCall)) {
      const batch = this.queue.splice(0, this.maxPerCall);
      this.inFlight += 1;
      void this.send(batch).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private async send(batch: Waiting[]): Promise<void> {
    this.counts.calls += 1;
    try {
      const answers = await this.client.actMany(batch.map((w) => w.request));
      batch.forEach((w, i) => this.settle(w, () => w.resolve(answers[i]!)));
    } catch (err) {
      if (err instanceof PolicyRequestError && batch.length > 1) {
        // One request spoiled the call: each goes alone, so only the bad one fails.
        await Promise.all(batch.map((w) => this.send([w])));
        return;
      }
      batch.forEach((w) => this.settle(w, () => w.reject(err)));
      if (err instanceof PolicyUnavailableError)
        for (const w of this.queue.splice(0)) this.settle(w, () => w.reject(err));
    }
  }
}
