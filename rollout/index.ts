/** Rollout service: policy server internals (engine, batcher, HTTP), checkpoints, and the env-side client. */
export * from './api';
export {
  DynamicBatcher,
  BatcherClosedError,
  BatcherOverloadedError,
  type BatchBackend,
  type BatcherOptions,
  type BatchEvent,
} from './batcher';
export { backoffDelay, sleep, DEFAULT_BACKOFF, type BackoffOptions } from './backoff';
export {
  policySpecHash,
  readCheckpoint,
  writeCheckpoint,
  writeInitialCheckpoint,
  latestCheckpointVersion,
  CheckpointRejectedError,
  type CheckpointRejectReason,
  type LoadedCheckpoint,
} from './checkpoint';
export {
  PolicyEngine,
  PolicyNotReadyError,
  BadActRequestError,
  type EngineOptions,
  type EngineHealth,
  type ReloadResult,
  type ActAnswer,
} from './engine';
export {
  createPolicyHttpServer,
  startPolicyHttpServer,
  type PolicyHttpOptions,
  type RunningPolicyServer,
} from './policy-server';
export {
  PolicyServerClient,
  PolicyRequestError,
  PolicyUnavailableError,
  type PolicyClientOptions,
  type PolicyAnswer,
} from './client';
export { createEmbeddedPolicy, embeddedPolicyFactory, type EmbeddedPolicyDefaults } from './episode-policy';
export { resolvePolicyToken, bearerMatches } from './token';
export { rolloutPolicyFactories, type RolloutPolicyOptions } from './factories';
