/**
 * A role started by `dartflow workers` / `npm start` (cli/local-workers.ts) gets an IPC channel to its
 * parent; when the parent dies, even by kill -9, the channel closes and the role shuts down gracefully
 * instead of lingering as an orphan (its Chromium follows: Playwright's pipe to the browser closes with
 * the role). Stand-alone roles (no IPC channel) are unaffected.
 */

/** How long a role may keep shutting down after its parent died (in-flight episodes finish meanwhile). */
const GRACE_MS = 90_000;

/**
 * Returns true when the parent was already gone at the call (shutdown has then run): a role that calls this
 * between creating its worker and running it should then exit instead of starting to poll.
 */
export function exitWithParent(shutdown: () => void): boolean {
  if (!process.send) return false;
  let done = false;
  const onParentGone = () => {
    if (done) return;
    done = true;
    // The parent read our stdout/stderr through pipes: with it gone, a log line would fail with EPIPE and
    // crash the role in the middle of its graceful shutdown.
    for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
    try {
      shutdown();
    } catch {
      // already shutting down
    }
    // Whatever the graceful path does, do not outlive the parent by more than the grace period.
    setTimeout(() => process.exit(0), GRACE_MS).unref();
  };
  // The parent may have died while this role was still starting up (connecting to Temporal, MinIO):
  // the 'disconnect' event is then long gone, but the channel reports it.
  if (!process.connected) {
    onParentGone();
    return true;
  }
  process.once('disconnect', onParentGone);
  // A 'disconnect' listener keeps the channel referenced, which would keep a role that finished its work
  // alive until the parent exits; the event still fires on an unreferenced channel.
  process.channel?.unref();
  return false;
}
