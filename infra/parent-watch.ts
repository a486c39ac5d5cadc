/**
 * A role started by `dartflow workers` / `npm start` (cli/local-workers.ts) gets an IPC channel to its
 * parent; when the parent dies, even by kill -9, the channel closes and the role shuts down gracefully
 * instead of lingering as an orphan. Stand-alone roles (no IPC channel) are unaffected.
 */
export function exitWithParent(shutdown: () => void): void {
  if (!process.send) return;
  process.once('disconnect', () => {
    try {
      shutdown();
    } catch {
      // already shutting down
    }
    // Whatever the graceful path does, do not outlive the parent by more than the grace period.
    setTimeout(() => process.exit(0), 90_000).unref();
  });
}
