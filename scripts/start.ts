/**
 * `npm start`: brings the infrastructure up by itself, starts the orchestrator worker and runs the main
 * job. Until the campaign workflows land (issue 6) the main job is the stack's proof workflow.
 */
import { randomUUID } from 'node:crypto';
import { createOrchestratorWorker } from '../workers/orchestrator-worker';
import { connectClient } from '../infra/temporal-connection';
import { TASK_QUEUES } from '../schemas/task-queues';
import { storageProofWorkflow } from '../workflows';
import { ensureInfra } from './ensure-infra';

async function main(): Promise<void> {
  const started = Date.now();
  const settings = await ensureInfra();
  const worker = await createOrchestratorWorker(settings);
  const client = await connectClient(settings);
  const workflowId = `proof-${randomUUID().slice(0, 8)}`;
  const ref = await worker.runUntil(
    client.workflow.execute(storageProofWorkflow, {
      taskQueue: TASK_QUEUES.orchestrator,
      workflowId,
      args: [{ message: 'dartflow stack is up' }],
    })
  );
  await client.connection.close();
  console.log(`\n[start] workflow ${workflowId} wrote s3://${ref.bucket}/${ref.key} (${ref.bytes} bytes, sha256 ${ref.sha256.slice(0, 12)}…)`);
  console.log(`[start] see it in the Temporal UI: ${settings.temporal.uiUrl}/namespaces/${settings.temporal.namespace}/workflows/${workflowId}`);
  console.log(`[start] done in ${((Date.now() - started) / 1000).toFixed(1)}s`);
}

main().catch((err: unknown) => {
  console.error(`[start] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
