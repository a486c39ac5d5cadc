/**
 * Pure sampling helpers (Node-free): a seeded PRNG, and drawing an action from a row of log-probs with
 * temperature or greedily. A request's seed fully determines its draw, so a step is reproducible.
 */

/** mulberry32: a tiny 32-bit PRNG, uniform in [0,1); deterministic across platforms. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal by Box–Muller (one value per call; simple beats fast here). */
export function normal(rng: () => number): number {
  const u = 1 - rng(); // (0,1]: log stays finite
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

export interface SampleOptions {
  /** Softmax temperature; 1 samples the policy itself. Ignored when greedy. */
  temperature?: number;
  /** Argmax instead of sampling (evaluation). */
  greedy?: boolean;
  /** Seed of this draw (e.g. a hash of trajectory id and step). */
  seed?: number;
  /** Or an explicit generator (takes precedence over seed). */
  rng?: () => number;
}

export interface SampledAction {
  index: number;
  /** log π(a) under the policy (temperature 1): what the trainer's importance ratio compares against. */
  logp: number;
  /**
   * log-prob of the draw under the distribution actually sampled from (p^(1/T) renormalised; 0 for greedy).
   * Equals `logp` at T = 1. Store this as the behaviour log-prob when sampling with T ≠ 1.
   */
  sampleLogp: number;
}

/** Row `i` of a [B,A] log-prob matrix (a view, no copy). */
export function row(logp: Float32Array, numActions: number, i: number): Float32Array {
  return logp.subarray(i * numActions, (i + 1) * numActions);
}

export function sampleAction(logp: ArrayLike<number>, opts: SampleOptions = {}): SampledAction {
  const n = logp.length;
  if (opts.greedy) {
    let best = 0;
    for (let i = 1; i < n; i++) if (logp[i]! > logp[best]!) best = i;
    return { index: best, logp: logp[best]!, sampleLogp: 0 };
  }
  const temperature = opts.temperature ?? 1;
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new Error(`temperature must be > 0, got ${temperature}`);
  const rng = opts.rng ?? mulberry32(opts.seed ?? 0);
  // Tempered log-probs, normalised with log-sum-exp; masked actions (≈ −1e9) get weight 0.
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logp[i]! / temperature);
  const w = new Float64Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) total += w[i] = Math.exp(logp[i]! / temperature - max);
  const u = rng() * total;
  let acc = 0;
  let index = -1;
  for (let i = 0; i < n; i++) {
    if (w[i]! === 0) continue;
    index = i; // last positive-weight entry: guards against rounding at the top end
    acc += w[i]!;
    if (u < acc) break;
  }
  return { index, logp: logp[index]!, sampleLogp: Math.log(w[index]! / total) };
}

/** FNV-1a of strings, to turn (trajectory id, step) into a per-request seed. */
export function seedFrom(...parts: Array<string | number>): number {
  let h = 0x811c9dc5;
  for (const ch of parts.join('\u0000')) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
