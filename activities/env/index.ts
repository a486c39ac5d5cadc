export {
  createEnvActivities,
  runEpisodeCore,
  type EnvActivities,
  type EnvActivityDeps,
  type EpisodeHooks,
} from './run-episode';
export { RunEpisodeInputSchema, type RunEpisodeInput, type RunEpisodeResult, type EpisodeHeartbeat } from './input';
export * from './policy';
export { builtinPolicies, createOraclePolicy, createRandomPolicy } from './policies';
export { toActivityFailure, NON_RETRYABLE_ENV_FAILURES } from './failures';
