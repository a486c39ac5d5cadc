/** Rollout service: policy server internals (engine, batcher, HTTP), checkpoints, and the env-side client. */
export * from './api';
export {
  encodeScreenshotImage,
  float32ToBase64,
  packActCall,
  type EncodedImage,
  type OutgoingActRequest,
} from './act-wire';
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
  checkEncodedImage,
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
export {
  createEmbeddedPolicy,
  embeddedPolicyFactory,
  type ActSender,
  type EmbeddedPolicyDefaults,
} from './episode-policy';
export { ActCoalescer, type ActCoalescerOptions, type ActCoalescerStats } from './act-coalescer';
export { resolvePolicyToken, bearerMatches } from './token';
export { rolloutPolicyFactories, type RolloutPolicyOptions } from './factories';
