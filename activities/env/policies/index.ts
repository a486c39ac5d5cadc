import type { PolicyFactory } from '../policy';
import { oraclePolicyFactory } from './oracle';
import { randomPolicyFactory } from './random';

export { createOraclePolicy, oraclePolicyFactory } from './oracle';
export { createRandomPolicy, randomPolicyFactory, mulberry32 } from './random';

/** The policies every env worker has; the policy client adds its own kinds next to these. */
export const builtinPolicies = (): Record<string, PolicyFactory> => ({
  oracle: oraclePolicyFactory,
  random: randomPolicyFactory,
});
