/**
 * Installs the process's Temporal Runtime with Core's Prometheus exporter on an internal loopback port
 * (metrics/server.ts re-serves it on the process's one public metrics port). Must run before the
 * process creates its first connection or worker: the Runtime is a per-process singleton.
 */
import { Runtime } from '@temporalio/worker';
import { freePort } from '../infra/ports';
import { installQuietRuntime } from '../infra/runtime';

/**
 * Histogram buckets in seconds for Core's latency metrics (useSecondsForDurations): Core's defaults stop
 * at 60 s, but an OSWorld episode (runEpisode's execution latency) and a train step take minutes.
 */
const LONG_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** Returns the URL of Core's exporter. Throws if a Runtime was already installed without one. */
export async function installTemporalRuntimeWithMetrics(globalTags: Record<string, string>): Promise<string> {
  if (Runtime._instance) throw new Error('the Temporal Runtime was installed before metrics were started');
  for (let attempt = 0; ; attempt++) {
    // The OS picks a free port and this binds it moments later; another process may win the race, so retry.
    const port = await freePort();
    try {
      installQuietRuntime({
        metrics: {
          prometheus: {
            bindAddress: `127.0.0.1:${port}`,
            countersTotalSuffix: true,
            useSecondsForDurations: true,
            histogramBucketOverrides: {
              activity_execution_latency: LONG_SECONDS,
              activity_schedule_to_start_latency: LONG_SECONDS,
            },
          },
          globalTags,
        },
      });
      return `http://127.0.0.1:${port}/metrics`;
    } catch (err) {
      if (attempt >= 4 || !/address already in use/i.test(String(err))) throw err;
    }
  }
}
