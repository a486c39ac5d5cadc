/** The shared `main` of a single-queue role process: create the worker, follow the parent, run until shut down. */
import type { Worker } from '@temporalio/worker';
import { exitWithParent } from '../infra/parent-watch';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';

export function runWorkerMain(
  role: string,
  taskQueue: string,
  create: (settings: InfraSettings) => Promise<Worker>
): void {
  const main = async () => {
    const worker = await create(loadInfraSettings());
    exitWithParent(() => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
    });
    console.log(`[${role}] polling task queue "${taskQueue}"`);
    await worker.run();
  };
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
