/** Temporal worker runtime logging: WARN by default (DARTFLOW_LOG_LEVEL=INFO|DEBUG for more). Install once per process. */
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';

let installed = false;
export function installQuietRuntime(): void {
  if (installed) return;
  installed = true;
  const level = (process.env.DARTFLOW_LOG_LEVEL ?? 'WARN').toUpperCase() as LogLevel;
  Runtime.install({ logger: new DefaultLogger(level) });
}
