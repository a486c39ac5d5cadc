/**
 * The stack's smoke test as an activity: writes a small JSON object to MinIO and returns its reference.
 * Idempotent: the key is derived from the workflow id, so a retry overwrites the same object.
 */
import { Context } from '@temporalio/activity';
import { z } from 'zod';
import { ObjectRefSchema, type ObjectRef } from '../../schemas/records';
import { safeSegment } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';

export const ProofInputSchema = z.object({ message: z.string().max(1000) });
export type ProofInput = z.infer<typeof ProofInputSchema>;

const ProofObjectSchema = z.object({
  message: z.string(),
  workflowId: z.string(),
  attempt: z.number(),
  writtenAt: z.number(),
});

export function createProofActivities(deps: { store: ObjectStore }) {
  return {
    async writeProofObject(input: ProofInput): Promise<ObjectRef> {
      const { message } = ProofInputSchema.parse(input);
      const info = Context.current().info;
      const workflowId = info.workflowExecution?.workflowId ?? info.activityId;
      await deps.store.ensureBucket();
      const key = `proof/${safeSegment(workflowId, 'workflowId')}.json`;
      const ref = await deps.store.putJson(
        key,
        { message, workflowId, attempt: info.attempt, writtenAt: Date.now() },
        ProofObjectSchema
      );
      return ObjectRefSchema.parse(ref);
    },
  };
}
