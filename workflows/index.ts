/** Every workflow type dartflow registers (the worker's workflowsPath entry). Names are stable API. */
export { storageProofWorkflow } from './proof';
export { campaignWorkflow } from './campaign';
export { taskGroupWorkflow } from './task-group';
export { evaluateWorkflow } from './evaluate';
export { modelRolloutWorkflow } from './model-rollout';
export { precollectWorkflow } from './precollect';
export { trainStepWorkflow } from './train-step';
export { rolloutShardWorkflow } from './rollout-shard';
