/**
 * The policy kinds this module adds to an env worker, ready to merge with the built-in ones:
 *   policies: { ...builtinPolicies(), ...rolloutPolicyFactories({ dataDir: settings.dataDir }) }
 * - `embedded`: dartflow's ONNX policy behind the policy servers (policy.endpoints = their URLs);
 * - `uitars`:   a vLLM-served UI-TARS (policy.endpoints = OpenAI-compatible base URLs, options.model).
 */
import path from 'node:path';
import type { PolicyFactory } from '../activities/env/policy';
import { uiTarsPolicyFactory, type UiTarsPolicyOptions } from '../vlm/uitars-policy';
import { embeddedPolicyFactory, type EmbeddedPolicyDefaults } from './episode-policy';
import { resolvePolicyToken } from './token';

export interface RolloutPolicyOptions {
  /** Where the default policy token file lives (`<dataDir>/policy-token`, shared with local policy servers). */
  dataDir: string;
  embedded?: EmbeddedPolicyDefaults;
  uitars?: Partial<UiTarsPolicyOptions>;
}

export function rolloutPolicyFactories(opts: RolloutPolicyOptions): Record<string, PolicyFactory> {
  let token: string | undefined;
  // Read lazily: a worker that never runs an embedded episode needs no token.
  const tokenProvider = () =>
    (token ??= resolvePolicyToken({ defaultFile: path.join(opts.dataDir, 'policy-token'), create: true }));
  return {
    embedded: embeddedPolicyFactory({ tokenProvider, ...opts.embedded }),
    uitars: uiTarsPolicyFactory(opts.uitars),
  };
}
