/** Runs workers against the real dev server on private task queues so tests never collide with `npm start`. */
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { installQuietRuntime } from '../../infra/runtime';
import type { InfraSettings } from '../../infra/settings';
import { connectWorker } from '../../infra/temporal-connection';
import { uniqueSuffix } from './infra';

export const testTaskQueue = (role: string): string => `${role}-test-${uniqueSuffix()}`;

export async function createTestWorker(
  settings: InfraSettings,
  options: Omit<WorkerOptions, 'connection' | 'namespace'>
): Promise<Worker> {
  installQuietRuntime();
  const connection = await connectWorker(settings);
  return Worker.create({ connection, namespace: settings.temporal.namespace, ...options });
}
