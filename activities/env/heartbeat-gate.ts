/**
 * Episode heartbeats: quiet for short episodes, kept alive through long env operations.
 *
 * Quiet start. Heartbeats of short episodes cost the Temporal server a write each and tell it nothing:
 * the SDK sends an activity's first heartbeat at once (later ones are throttled), so every episode paid
 * one RecordActivityTaskHeartbeat even when it finished in seconds, long before its heartbeat timeout. The
 * gate holds heartbeats back for a quiet period at the start of the activity (a sixth of its heartbeat
 * timeout: 10 s of the default minute). If the activity still runs when the quiet period ends, the latest
 * held-back details go out then; from then on every heartbeat passes straight to the SDK (which throttles).
 * Cancellation reaches an activity only through heartbeat responses, so it is noticed at most a quiet
 * period later than before.
 *
 * Keep-alive. Episodes heartbeat at every step, but one env operation can outlast the heartbeat timeout
 * (an OSWorld reset reverts a VM snapshot: tens of seconds, with a tail to minutes). Without a heartbeat
 * in that time Temporal timed the attempt out and started a retry on a second env while the first attempt,
 * alive and holding its env, finished its reset: measured at 2,048 OSWorld-like envs at real time, the env
 * workers held 98.6 % of their envs while only 80 % of env time went to episodes that were kept. So once
 * the quiet period is over the gate re-sends the latest details whenever nothing was sent for a third of
 * the heartbeat timeout. The SDK sends the first call at once and then the newest one at the end of each
 * throttle period (0.8 of the timeout), so the server hears from a live attempt every 0.8 timeout. The
 * heartbeat timeout then means what it is for: the worker process is gone or cut off (kill -9, a lost
 * machine, a partition; also an event loop stalled for about half the timeout). A
 * hung env operation is bounded by the env's own operation timeouts (envs/remote, envs/osworld) and by
 * the episode's start-to-close timeout.
 */
export interface HeartbeatGate<D> {
  heartbeat(details: D): void;
  /** Call when the activity ends: a held-back heartbeat is dropped, never sent for a finished activity. */
  dispose(): void;
}

export const HEARTBEAT_QUIET_FRACTION = 1 / 6;
export const HEARTBEAT_KEEP_ALIVE_FRACTION = 1 / 3;

export function heartbeatGate<D>(
  send: (details: D) => void,
  heartbeatTimeoutMs: number | undefined,
  // Monotonic: a wall clock stepped back (NTP) would push the next keep-alive past the timeout.
  now: () => number = () => performance.now()
): HeartbeatGate<D> {
  // No heartbeat timeout: nothing to keep alive and nothing to save; every heartbeat goes straight out.
  if (!(heartbeatTimeoutMs && heartbeatTimeoutMs > 0)) return { heartbeat: send, dispose: () => undefined };
  const startedAt = now();
  const quietMs = heartbeatTimeoutMs * HEARTBEAT_QUIET_FRACTION;
  const keepAliveMs = heartbeatTimeoutMs * HEARTBEAT_KEEP_ALIVE_FRACTION;
  let open = false;
  let latest: { details: D } | null = null;
  let lastSentAt = startedAt;
  let timer: NodeJS.Timeout | null = null;
  let disposed = false;

  const emit = (details: D) => {
    lastSentAt = now();
    send(details);
  };
  // One timer at a time: the end of the quiet period, then the next keep-alive deadline.
  // Unref'd: a pending keep-alive never holds a worker process open (dispose clears it anyway).
  const arm = (at: number) => {
    timer = setTimeout(onTimer, Math.max(0, at - now()));
    timer.unref?.();
  };
  const onTimer = () => {
    timer = null;
    if (disposed || !latest) return;
    try {
      if (!open) {
        open = true;
        emit(latest.details);
      } else if (now() - lastSentAt >= keepAliveMs) emit(latest.details);
    } finally {
      arm(lastSentAt + keepAliveMs); // a send that threw must not end the keep-alive
    }
  };

  return {
    heartbeat(details) {
      if (disposed) return;
      latest = { details };
      if (!open && now() - startedAt >= quietMs) open = true;
      if (open) emit(details);
      // Not re-armed per step: the keep-alive timer checks when it fires whether a step heartbeat came since.
      if (!timer) arm(open ? lastSentAt + keepAliveMs : startedAt + quietMs);
    },
    dispose() {
      disposed = true;
      latest = null;
      if (timer) clearTimeout(timer);
      timer = null;
    },
  };
}
