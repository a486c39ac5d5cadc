/**
 * Uniform-random policy over the embedded action space (valid entries only): the chance baseline
 * every task's reward is compared with. Deterministic given the per-step seed.
 */
import { embeddedIndexToAction, embeddedValidMask } from '../../../actions/embedded';
import { renderUiTarsResponse, uiTarsCoordSpace } from '../../../actions/uitars';
import type { EpisodePolicy, PolicyFactory } from '../policy';

/** mulberry32: tiny, fast, good enough for sampling actions. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function createRandomPolicy(): EpisodePolicy {
  return {
    async act(obs, opts) {
      const valid = embeddedValidMask(obs.fields)
        .map((ok, i) => (ok ? i : -1))
        .filter((i) => i >= 0);
      const rng = mulberry32(opts.seed);
      const index = valid[Math.floor(rng() * valid.length)] ?? 0;
      const action = embeddedIndexToAction(index, obs.fields);
      const n = valid.length;
      return {
        action,
        actionText: action
          ? renderUiTarsResponse(action, uiTarsCoordSpace({ width: obs.width, height: obs.height }))
          : '',
        actionIndex: index,
        logProb: -Math.log(n),
        entropy: Math.log(n),
        policyVersion: 0,
        policyServer: 'random',
      };
    },
  };
}

export const randomPolicyFactory: PolicyFactory = () => createRandomPolicy();
