/**
 * A worker process's Prometheus endpoint: dartflow's registry plus the Temporal SDK's metrics on one
 * port (docs/metrics.md). Worker mains call startWorkerMetrics first, before any Temporal connection,
 * because it installs the process's Temporal Runtime with Core's exporter; then they hand the result to
 * the role's wiring (metrics/env.ts, policy.ts, trainer.ts, orchestrator.ts).
 */
import type { ActivityInterceptorsFactory, WorkerInterceptors } from '@temporalio/worker';
import { metricsEndpointConfig, type MetricsRole } from './config';
import { MetricsRegistry } from './registry';
import { MetricsPortInUseError, startMetricsServer } from './server';
import { installTemporalRuntimeWithMetrics } from './temporal-runtime';

export interface WorkerMetrics {
  role: MetricsRole;
  registry: MetricsRegistry;
  /** http://host:port/metrics */
  url: string;
  /** Activity interceptors of the role (added by its wiring), merged into the worker's by withMetrics(). */
  activityInterceptors: ActivityInterceptorsFactory[];
  /** Async reads done before each scrape (bounded; a slow one is skipped, not waited for). */
  refreshers: Array<() => Promise<void>>;
  close(): Promise<void>;
}

export interface StartWorkerMetricsOptions {
  env?: NodeJS.ProcessEnv;
  /** Where the "serving metrics on …" line goes (default console.log). */
  log?: (line: string) => void;
}

/**
 * Starts the endpoint of this process, or returns undefined when metrics are off (DARTFLOW_METRICS_PORT=0,
 * or a default port that is taken: then a warning says which variable to set). A port the user chose
 * that is taken is an error.
 */
export async function startWorkerMetrics(
  role: MetricsRole,
  opts: StartWorkerMetricsOptions = {}
): Promise<WorkerMetrics | undefined> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const config = metricsEndpointConfig(role, opts.env ?? process.env);
  if (!config) return undefined;
  const registry = new MetricsRegistry({ role });
  const refreshers: Array<() => Promise<void>> = [];
  let temporalUrl: string | undefined;
  let server;
  try {
    server = await startMetricsServer({
      registry,
      host: config.host,
      port: config.port,
      // Read per scrape: the Runtime is installed just below, after the public port is known to be ours.
      get temporalUrl() {
        return temporalUrl;
      },
      refreshers,
      portVariable: config.explicit ? 'DARTFLOW_METRICS_PORT' : 'DARTFLOW_METRICS_PORT (or DARTFLOW_METRICS_BASE_PORT)',
    });
  } catch (err) {
    if (!(err instanceof MetricsPortInUseError) || config.explicit) throw err;
    log(`[${role}] warning: no metrics endpoint: ${err.message}`);
    return undefined;
  }
  try {
    temporalUrl = await installTemporalRuntimeWithMetrics({ role });
  } catch (err) {
    await server.close();
    throw err;
  }
  log(`[${role}] metrics on ${server.url}`);
  return {
    role,
    registry,
    url: server.url,
    activityInterceptors: [],
    refreshers,
    close: () => server.close(),
  };
}

/** The worker's interceptors with the metrics' activity interceptors added (unchanged when metrics are off). */
export function withMetrics(interceptors: WorkerInterceptors, metrics: WorkerMetrics | undefined): WorkerInterceptors {
  if (!metrics?.activityInterceptors.length) return interceptors;
  // Outermost first, so the payload guard's own failures are counted too.
  return { ...interceptors, activity: [...metrics.activityInterceptors, ...(interceptors.activity ?? [])] };
}
