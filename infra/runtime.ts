/** Temporal worker runtime logging: WARN by default (DARTFLOW_LOG_LEVEL=INFO|DEBUG for more). Install once per process. */
import { DefaultLogger, Runtime, type LogLevel, type TelemetryOptions } from '@temporalio/worker';

let installed = false;
/**
 * `telemetryOptions` (metrics/temporal-runtime.ts: Core's Prometheus exporter) only take effect on the
 * first call of the process, which is why worker mains start their metrics before creating workers.
 */
export function installQuietRuntime(telemetryOptions?: TelemetryOptions): void {
  if (installed) return;
  const level = (process.env.DARTFLOW_LOG_LEVEL ?? 'WARN').toUpperCase() as LogLevel;
  Runtime.install({ logger: new DefaultLogger(level), ...(telemetryOptions ? { telemetryOptions } : {}) });
  installed = true;
}
