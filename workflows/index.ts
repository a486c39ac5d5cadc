/** Every workflow type dartflow registers (the worker's workflowsPath entry). Names are stable API. */
export { storageProofWorkflow } from './proof';
