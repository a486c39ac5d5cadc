/**
 * Exponential backoff with full jitter (delay = U(0, min(cap, base·2^attempt))). Jitter matters here:
 * when a policy server restarts, dozens of env workers retry at once and would otherwise hit it in
 * lock-step. Shared by the policy-server client and the VLM client.
 */

export interface BackoffOptions {
  /** Delay scale of the first retry, ms. */
  baseMs: number;
  /** Largest delay, ms. */
  capMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 100, capMs: 5_000 };

/** Delay before retry number `attempt` (0 = first retry). `rand` is injectable for tests. */
export function backoffDelay(
  attempt: number,
  opts: BackoffOptions = DEFAULT_BACKOFF,
  rand: () => number = Math.random
): number {
  const ceiling = Math.min(opts.capMs, opts.baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(rand() * ceiling);
}

/** Sleeps `ms`, waking early (with the signal's reason) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
