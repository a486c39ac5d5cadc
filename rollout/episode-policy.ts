/**
 * The embedded policy as the env worker sees it: an EpisodePolicy (activities/env/policy.ts) that sends
 * each step to the policy servers through a PolicyServerClient. One client per (endpoints, token) is
 * shared by all episodes of the process, so least-loaded routing counts every in-flight step, and its
 * ActCoalescer lets steps of different episodes that wait at the same time share one HTTP call.
 *
 * Register in the env worker: `policies: { ...builtinPolicies(), ...rolloutPolicyFactories() }`, then
 * runEpisode input `policy: { kind: 'embedded', endpoints: [...policy server URLs], temperature }`.
 */
import type { EpisodePolicy, PolicyFactory, PolicyObservation } from '../activities/env/policy';
import { ActCoalescer, type ActCoalescerOptions } from './act-coalescer';
import { PolicyRequestError, PolicyServerClient, type PolicyClientOptions } from './client';
import type { EncodedImage } from './act-wire';
import { EncodedImageCache } from './encoded-image-cache';

export interface EmbeddedPolicyDefaults extends Partial<Omit<PolicyClientOptions, 'endpoints'>> {
  /** Returns the bearer token when none is given (e.g. () => resolvePolicyToken({...})); read lazily. */
  tokenProvider?: () => string;
  /** How the process's concurrent episodes share HTTP calls (rollout/act-coalescer.ts). */
  coalescing?: ActCoalescerOptions;
}

/** Sends one act request: a PolicyServerClient (one call each) or an ActCoalescer (shared calls). */
export type ActSender = Pick<PolicyServerClient, 'act' | 'inputSize'>;

/**
 * The screenshot as the policy server wants it. Once the client knows the served input size (every
 * answer names it), the env worker encodes the screenshot itself — it holds the PNG anyway, and env
 * workers scale out while a policy server's main thread is shared by every env — so the server only
 * packs batches. Until then (the client's first request), the PNG goes as is.
 */
function screenshotForServer(
  obs: PolicyObservation,
  inputSize: number | undefined,
  images: EncodedImageCache
): { pngBase64: string } | { encoded: EncodedImage } {
  if (inputSize === undefined)
    return { pngBase64: Buffer.from(obs.png.buffer, obs.png.byteOffset, obs.png.byteLength).toString('base64') };
  return { encoded: images.encode(obs.png, obs, inputSize) };
}

export function createEmbeddedPolicy(
  client: ActSender,
  opts: { greedy?: boolean; images?: EncodedImageCache } = {}
): EpisodePolicy {
  const images = opts.images ?? new EncodedImageCache();
  // The episode's last action and screenshot: the policy's `prev` input (did the last action change
  // the screen?), exactly as the trainer rebuilds it from the recorded steps (content-addressed keys are
  // equal exactly when the PNG bytes are).
  let last: { actionIndex: number; png: Uint8Array } | undefined;
  return {
    async act(obs, { seed, temperature }) {
      // Temperature 0 means "greedy" in campaign configs (evaluation); the server wants T > 0 to sample.
      const greedy = opts.greedy === true || temperature <= 0;
      const previous = last
        ? { actionIndex: last.actionIndex, changed: !Buffer.from(last.png).equals(Buffer.from(obs.png)) }
        : undefined;
      const request = (inputSize: number | undefined) => ({
        observation: {
          ...screenshotForServer(obs, inputSize, images),
          instruction: obs.instruction,
          fields: obs.fields,
          ...(previous ? { previous } : {}),
        },
        seed: seed >>> 0,
        temperature: greedy ? 1 : temperature,
        greedy,
      });
      let a;
      try {
        a = await client.act(request(client.inputSize));
      } catch (err) {
        // The fleet changed to another input size since the last answer: send the PNG this once
        // (its answer teaches the client the new size).
        if (!(err instanceof PolicyRequestError && err.code === 'input_size_mismatch')) throw err;
        a = await client.act(request(undefined));
      }
      last = { actionIndex: a.actionIndex, png: obs.png };
      return {
        action: a.action,
        actionText: a.actionText,
        actionIndex: a.actionIndex,
        logProb: a.logProb,
        tokenLogProbs: [a.logProb],
        entropy: a.entropy,
        policyVersion: a.policyVersion,
        policyServer: a.serverId,
      };
    },
  };
}

/** Factory for runEpisode's `policy.kind: 'embedded'`; ctx.endpoints are the policy server URLs. */
export function embeddedPolicyFactory(defaults: EmbeddedPolicyDefaults = {}): PolicyFactory {
  const clients = new Map<string, ActCoalescer>();
  // One cache for every episode of the process: episodes of one task share their frames.
  const images = new EncodedImageCache();
  return (ctx) => {
    const token = defaults.token ?? defaults.tokenProvider?.();
    if (!token) throw new Error('embedded policy: no policy server token configured');
    const key = `${[...ctx.endpoints].sort().join(' ')}\u0000${token}`;
    let client = clients.get(key);
    if (!client) {
      const { tokenProvider: _tp, coalescing, ...rest } = defaults;
      client = new ActCoalescer(new PolicyServerClient({ ...rest, token, endpoints: ctx.endpoints }), coalescing);
      clients.set(key, client);
    }
    return createEmbeddedPolicy(client, { greedy: ctx.options.greedy === true, images });
  };
}
