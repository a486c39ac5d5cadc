/** Which Update failures the client sends again: only refusals at a continue-as-new boundary. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServiceError, WorkflowUpdateFailedError } from '@temporalio/client';
import { isRunBoundaryRefusal } from '../../client/dartflow-client';

test('isRunBoundaryRefusal: "workflow is closing" (UNAVAILABLE / ABORTED) is sent again; validation failures are final', () => {
  const grpc = (code: number, details: string) => Object.assign(new Error(details), { code, details });
  assert.equal(isRunBoundaryRefusal(new ServiceError('Workflow Update failed', { cause: grpc(14, 'x') })), true);
  assert.equal(isRunBoundaryRefusal(new ServiceError('Workflow Update failed', { cause: grpc(10, 'x') })), true);
  assert.equal(
    isRunBoundaryRefusal(
      new ServiceError('Workflow Update failed', {
        cause: grpc(9, 'workflow operation can not be applied because workflow is closing'),
      })
    ),
    true
  );
  assert.equal(isRunBoundaryRefusal(new ServiceError('Workflow Update failed', { cause: grpc(3, 'bad') })), false);
  assert.equal(isRunBoundaryRefusal(new WorkflowUpdateFailedError('rejected by the validator', undefined)), false);
  assert.equal(isRunBoundaryRefusal(new Error('anything else')), false);
});
