/** Pure, Node-free algorithm modules of dartflow (importable from workflows, activities and tests). */
export * from './common';
export * from './prng';
export * from './advantages';
export * from './ppo';
export * from './importance';
export * from './kl';
export * from './entropy-mask';
export * from './loss';
export * from './adam';
export * from './curation';
