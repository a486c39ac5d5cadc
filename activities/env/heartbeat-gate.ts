/**
 * Heartbeats of short episodes cost the Temporal server a write each and tell it nothing: the SDK sends
 * an activity's first heartbeat at once (later ones are throttled), so every episode paid one
 * RecordActivityTaskHeartbeat even when it finished in seconds, long before its heartbeat timeout.
 *
 * The gate holds heartbeats back for a quiet period at the start of the activity (a sixth of its
 * heartbeat timeout: 10 s of the default minute). If the activity still runs when the quiet period ends,
 * the latest held-back details go out then, so the server hears from a live activity as early as before
 * relative to its timeout; from then on every heartbeat passes straight to the SDK (which throttles).
 * Cancellation reaches an activity only through heartbeat responses, so it is noticed at most a quiet
 * period later than before.
 */
export interface HeartbeatGate<D> {
  heartbeat(details: D): void;
  /** Call when the activity ends: a held-back heartbeat is dropped, never sent for a finished activity. */
  dispose(): void;
}

export const HEARTBEAT_QUIET_FRACTION = 1 / 6;

export function heartbeatGate<D>(
  send: (details: D) => void,
  heartbeatTimeoutMs: number | undefined,
  now: () => number = Date.now
): HeartbeatGate<D> {
  const startedAt = now();
  const quietMs = (heartbeatTimeoutMs ?? 0) * HEARTBEAT_QUIET_FRACTION;
  let open = quietMs <= 0;
  let held: { details: D } | null = null;
  let timer: NodeJS.Timeout | null = null;
  let disposed = false;
  return {
    heartbeat(details) {
      if (disposed) return;
      if (open || now() - startedAt >= quietMs) {
        open = true;
        held = null;
        send(details);
        return;
      }
      held = { details };
      timer ??= setTimeout(
        () => {
          timer = null;
          open = true;
          if (held && !disposed) send(held.details);
          held = null;
        },
        Math.max(0, startedAt + quietMs - now())
      );
    },
    dispose() {
      disposed = true;
      held = null;
      if (timer) clearTimeout(timer);
      timer = null;
    },
  };
}
