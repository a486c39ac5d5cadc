/** Every workflow type dartflow registers (the worker's workflowsPath entry). Names are stable API. */
import type * as CampaignModule from './campaign';

export { storageProofWorkflow } from './proof';
export { taskGroupWorkflow } from './task-group';
export { evaluateWorkflow } from './evaluate';
export { modelRolloutWorkflow } from './model-rollout';
export { precollectWorkflow } from './precollect';
export { trainStepWorkflow } from './train-step';
export { rolloutShardWorkflow } from './rollout-shard';
export { rolloutLaneWorkflow } from './rollout-lane';

/**
 * The campaign workflow, with its module loaded on first use. The worker evaluates this entry module for
 * every workflow it creates (each one gets its own module instances), and the campaign's imports build
 * its zod config and carried-state schemas when evaluated: ≈ a third of the orchestrator's workflow-thread
 * CPU in the 512-env scale bench went into building them for every task-group child, which never uses
 * them. Loaded here, only campaign workflows pay for them. (webpack resolves this require statically
 * into the same bundle; the name and signature are the campaign module's.)
 */
export function campaignWorkflow(
  ...args: Parameters<typeof CampaignModule.campaignWorkflow>
): ReturnType<typeof CampaignModule.campaignWorkflow> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const campaign = require('./campaign') as typeof CampaignModule;
  return campaign.campaignWorkflow(...args);
}
