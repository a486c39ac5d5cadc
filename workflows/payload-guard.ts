/**
 * Workflow interceptors that check outgoing payloads against Temporal's limits (schemas/payload-limits.ts)
 * before a command is sent: activity inputs, child workflow inputs, signals to other workflows, the
 * continue-as-new state and the workflow result. An oversized payload throws PayloadTooLargeError (a plain
 * Error): the call site can catch it; uncaught, the workflow *task* fails and retries with the error in the
 * UI, so the workflow and its history stay intact until the code is fixed — nothing is lost.
 * Registered by the orchestrator worker through `interceptors.workflowModules`.
 */
import type {
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptorsFactory,
  WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { assertPayloadsFit } from '../schemas/payload-limits';

const outbound: WorkflowOutboundCallsInterceptor = {
  scheduleActivity(input, next) {
    assertPayloadsFit(`input of activity ${input.activityType}`, input.args);
    return next(input);
  },
  scheduleLocalActivity(input, next) {
    assertPayloadsFit(`input of local activity ${input.activityType}`, input.args);
    return next(input);
  },
  startChildWorkflowExecution(input, next) {
    assertPayloadsFit(`input of child workflow ${input.workflowType}`, input.options.args ?? []);
    return next(input);
  },
  signalWorkflow(input, next) {
    assertPayloadsFit(`signal ${input.signalName}`, input.args);
    return next(input);
  },
  continueAsNew(input, next) {
    assertPayloadsFit(`continue-as-new state of ${input.options.workflowType}`, input.args);
    return next(input);
  },
};

const inbound: WorkflowInboundCallsInterceptor = {
  async execute(input, next) {
    const result = await next(input);
    assertPayloadsFit('workflow result', [result]);
    return result;
  },
};

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [outbound], inbound: [inbound] });
