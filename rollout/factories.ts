/**
 * The policy kinds this module adds to an env worker, ready to merge with the built-in ones:
 *   policies: { ...builtinPolicies(), ...rolloutPolicyFactories({ dataDir: settings.dataDir }) }
 * - `embedded`: dartflow's ONNX policy behind the policy servers (policy.endpoints = their URLs);
 * - `uitars`:   a vLLM-served UI-TARS (policy.endpoints = OpenAI-compatible base URLs, options.model),
 *               normally dartflow's vLLM fronts (workers/vllm-policy-server.ts, docs/vlm.md);
 * - `uitars-oracle`: the task oracle's actions as UI-TARS turns with the prompt the `uitars` kind would
 *               send (same options and defaults): a VLM campaign's behaviour-cloning demonstrations
 *               (vlm/uitars-oracle-policy.ts).
 */
import path from 'node:path';
import type { PolicyFactory } from '../activities/env/policy';
import { uiTarsOraclePolicyFactory } from '../vlm/uitars-oracle-policy';
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
    // dartflow's vLLM fronts (workers/vllm-policy-server.ts) take the same policy token as the embedded
    // policy servers; options.uitars.apiKey overrides it (e.g. a vLLM started with its own --api-key).
    uitars: (ctx) => uiTarsPolicyFactory({ apiKey: tokenProvider(), ...opts.uitars })(ctx),
    // Demonstrations need no endpoint (hence no token): the oracle decides, the text is rendered locally.
    'uitars-oracle': uiTarsOraclePolicyFactory(opts.uitars),
  };
}
