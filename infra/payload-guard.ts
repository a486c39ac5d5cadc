/**
 * The Node side of dartflow's payload guard (schemas/payload-limits.ts): client interceptors check what
 * a client sends (workflow start, signals, updates) and activity interceptors check what an activity
 * returns, so an oversized payload is refused where it is made, with a clear error, instead of by the
 * server later. Activity results over the limit fail non-retryably (a retry would produce the same bytes).
 */
import { ApplicationFailure } from '@temporalio/common';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { ActivityInterceptorsFactory, WorkerInterceptors } from '@temporalio/worker';
import { assertPayloadsFit, PayloadTooLargeError } from '../schemas/payload-limits';

export const payloadGuardClientInterceptor: WorkflowClientInterceptor = {
  async startWithDetails(input, next) {
    assertPayloadsFit(`input of workflow ${input.workflowType} (${input.options.workflowId})`, input.options.args);
    return next(input);
  },
  async signal(input, next) {
    assertPayloadsFit(`signal ${input.signalName} to ${input.workflowExecution.workflowId}`, input.args);
    return next(input);
  },
  async signalWithStart(input, next) {
    assertPayloadsFit(`signal ${input.signalName} (signal-with-start)`, input.signalArgs);
    assertPayloadsFit(`input of workflow ${input.workflowType} (${input.options.workflowId})`, input.options.args);
    return next(input);
  },
  async startUpdate(input, next) {
    assertPayloadsFit(`update ${input.updateName} to ${input.workflowExecution.workflowId}`, input.args);
    return next(input);
  },
};

export const payloadGuardActivityInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      const result = await next(input);
      try {
        assertPayloadsFit(`result of activity ${ctx.info.activityType}`, [result]);
      } catch (err) {
        if (err instanceof PayloadTooLargeError)
          throw ApplicationFailure.create({ type: 'PayloadTooLargeError', message: err.message, nonRetryable: true });
        throw err;
      }
      return result;
    },
  },
});

/** Worker interceptors: activity results always; workflow commands when the worker runs workflows. */
export function payloadGuardInterceptors(opts: { workflows?: boolean } = {}): WorkerInterceptors {
  return {
    activity: [payloadGuardActivityInterceptor],
    ...(opts.workflows ? { workflowModules: [require.resolve('../workflows/payload-guard')] } : {}),
  };
}
