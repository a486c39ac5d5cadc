/** The shared `main` of a single-queue role process: create the worker, follow the parent, run until shut down. */
import type { Worker } from '@temporalio/worker';
import { exitWithParent } from '../infra/parent-watch';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';
import type { MetricsRole } from '../metrics/config';
import { startWorkerMetrics, type WorkerMetrics } from '../metrics/worker-metrics';

export function runWorkerMain(
  role: MetricsRole,
  taskQueue: string,
  create: (settings: InfraSettings, metrics: WorkerMetrics | undefined) => Promise<Worker>
): void {
  const main = async () => {
    // First: it installs the Temporal Runtime with its metrics exporter (docs/metrics.md).
    const metrics = await startWorkerMetrics(role);
    const worker = await create(loadInfraSettings(), metrics);
    const parentGone = exitWithParent(() => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
    });
    // The parent died while this role was starting (a created worker is not RUNNING yet, so there is nothing
    // to shut down): do not start polling for a parent that is gone.
    if (parentGone) process.exit(0);
    console.log(`[${role}] polling task queue "${taskQueue}"`);
    await worker.run();
  };
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
