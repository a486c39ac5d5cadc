/** The first end-to-end workflow: proves Temporal → activity → MinIO works; returns the object's key. */
import { proxyActivities } from '@temporalio/workflow';
import type { createProofActivities } from '../activities/data/proof';
import type { ObjectRef } from '../schemas/records';

const { writeProofObject } = proxyActivities<ReturnType<typeof createProofActivities>>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '30 seconds',
    maximumAttempts: 10,
    nonRetryableErrorTypes: ['ZodError'],
  },
});

export interface ProofWorkflowInput {
  message: string;
}

export async function storageProofWorkflow(input: ProofWorkflowInput): Promise<ObjectRef> {
  return writeProofObject({ message: input.message });
}
