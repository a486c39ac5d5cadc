export * from './types';
export * from './errors';
export { SlotPool } from './slot-pool';
export { BrowserEnv } from './browser/browser-env';
export { BrowserEnvPool } from './browser/pool';
export { BrowserHost, CHROMIUM_ARGS, NETWORK_LOCKDOWN_ARGS } from './browser/host';
export {
  SimulatedEnv,
  SimulatedEnvPool,
  SIM_PROFILES,
  sampleLatency,
  type SimProfile,
  type LatencyDist,
  type RewardModel,
} from './simulated';
export { RemoteEnv, RemoteEnvPool } from './remote/client';
export { createEnvPool, envPoolConfigFromEnv, EnvPoolConfigSchema, type EnvPoolConfig } from './pool-factory';
