/** Public API of the embedded policy (trainer, policy server, env workers import from here). */
export * from './spec';
export * from './weights';
export * from './observation';
export * from './action-space';
export * from './sampling';
export { buildForwardGraph, IO } from './graph-forward';
export { buildTrainGraph } from './graph-train';
export * from './session';
