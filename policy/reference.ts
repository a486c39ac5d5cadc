/**
 * An independent plain-TypeScript forward pass in float64, written from the architecture description
 * (not from the ONNX graph code). Tests only: it checks the generated forward graph and serves as the
 * float64 loss for finite-difference checks of the generated backward graph.
 */
import { convGeometry, IMAGE_CHANNELS, numActions, trunkChannels, type PolicySpec } from './spec';

export type RefWeights = Record<string, ArrayLike<number>>;

export interface RefBatch {
  batch: number;
  obs: ArrayLike<number>; // [B,3,S,S]
  text: ArrayLike<number>; // [B,V]
  mask: ArrayLike<number>; // [B,A]
}

function get(w: RefWeights, name: string): ArrayLike<number> {
  const t = w[name];
  if (!t) throw new Error(`reference: weight ${name} missing`);
  return t;
}

/**
 * Direct convolution with zero padding; x [B,ci,n,n] → [B,co,m,m]. Loops run per kernel tap over the
 * output plane (weight hoisted, valid output range precomputed) so the float64 FD checks stay fast.
 */
function conv2d(
  x: ArrayLike<number>,
  B: number,
  ci: number,
  n: number,
  w: ArrayLike<number>,
  bias: ArrayLike<number>,
  co: number,
  k: number,
  s: number,
  pad: number,
  m: number
): Float64Array {
  const out = new Float64Array(B * co * m * m);
  // Output rows/cols whose input index o·s + t − pad lies inside [0, n).
  const lo = (t: number): number => Math.max(0, Math.ceil((pad - t) / s));
  const hi = (t: number): number => Math.min(m, Math.floor((n - 1 + pad - t) / s) + 1);
  for (let b = 0; b < B; b++) {
    for (let o = 0; o < co; o++) {
      const ob = (b * co + o) * m * m;
      out.fill(bias[o]!, ob, ob + m * m);
      for (let i = 0; i < ci; i++) {
        const xb = (b * ci + i) * n * n;
        for (let ky = 0; ky < k; ky++) {
          for (let kx = 0; kx < k; kx++) {
            const wv = w[((o * ci + i) * k + ky) * k + kx]!;
            const x0 = lo(kx);
            const x1 = hi(kx);
            for (let oy = lo(ky), y1 = hi(ky); oy < y1; oy++) {
              const xr = xb + (oy * s + ky - pad) * n - pad + kx;
              const orow = ob + oy * m;
              for (let ox = x0; ox < x1; ox++) out[orow + ox]! += wv * x[xr + ox * s]!;
            }
          }
        }
      }
    }
  }
  return out;
}

/** y[b,o] = Σ_i x[b,i]·w[o,i] + bias[o] (PyTorch Linear layout). */
function linear(
  x: ArrayLike<number>,
  B: number,
  nIn: number,
  w: ArrayLike<number>,
  bias: ArrayLike<number> | null,
  nOut: number
): Float64Array {
  const y = new Float64Array(B * nOut);
  for (let b = 0; b < B; b++) {
    for (let o = 0; o < nOut; o++) {
      let acc = bias ? bias[o]! : 0;
      for (let i = 0; i < nIn; i++) acc += x[b * nIn + i]! * w[o * nIn + i]!;
      y[b * nOut + o] = acc;
    }
  }
  return y;
}

const relu = (x: Float64Array): Float64Array => x.map((v) => (v > 0 ? v : 0));

export function referenceForward(
  spec: PolicySpec,
  w: RefWeights,
  batch: RefBatch
): { logp: Float64Array; entropy: Float64Array } {
  const B = batch.batch;
  const A = numActions(spec);
  const C = trunkChannels(spec);
  const G = spec.gridSize;
  const geo = convGeometry(spec);
  let x: ArrayLike<number> = batch.obs;
  let ch = IMAGE_CHANNELS;
  let n = spec.imageSize;
  for (const g of geo) {
    const z = conv2d(
      x,
      B,
      ch,
      n,
      get(w, `conv${g.index}.weight`),
      get(w, `conv${g.index}.bias`),
      g.outChannels,
      g.kernel,
      g.stride,
      g.pad,
      g.outSize
    );
    x = g.index < geo.length - 1 ? relu(z) : z;
    ch = g.outChannels;
    n = g.outSize;
  }
  // FiLM
  const e = linear(batch.text, B, spec.vocabSize, get(w, 'text.weight'), null, spec.textEmbed);
  const f = linear(e, B, spec.textEmbed, get(w, 'film.weight'), get(w, 'film.bias'), 2 * C);
  const h = new Float64Array(B * C * G * G);
  for (let b = 0; b < B; b++) {
    for (let c = 0; c < C; c++) {
      const scale = 1 + f[b * 2 * C + c]!;
      const shift = f[b * 2 * C + C + c]!;
      for (let j = 0; j < G * G; j++) {
        const idx = (b * C + c) * G * G + j;
        h[idx] = Math.max(0, x[idx]! * scale + shift);
      }
    }
  }
  // Heads
  const cw = get(w, 'click.weight');
  const cb = get(w, 'click.bias')[0]!;
  const pooled = new Float64Array(B * C);
  const logits = new Float64Array(B * A);
  for (let b = 0; b < B; b++) {
    for (let j = 0; j < G * G; j++) {
      let acc = cb;
      for (let c = 0; c < C; c++) acc += cw[c]! * h[(b * C + c) * G * G + j]!;
      logits[b * A + j] = acc;
    }
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let j = 0; j < G * G; j++) s += h[(b * C + c) * G * G + j]!;
      pooled[b * C + c] = s / (G * G);
    }
  }
  const tokens = linear(pooled, B, C, get(w, 'token.weight'), get(w, 'token.bias'), A - G * G);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < A - G * G; t++) logits[b * A + G * G + t] = tokens[b * (A - G * G) + t]!;
  // Mask, log-softmax, entropy
  const logp = new Float64Array(B * A);
  const entropy = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let max = -Infinity;
    for (let a = 0; a < A; a++) max = Math.max(max, (logits[b * A + a]! += batch.mask[b * A + a]!));
    let sum = 0;
    for (let a = 0; a < A; a++) sum += Math.exp(logits[b * A + a]! - max);
    const lse = max + Math.log(sum);
    let ent = 0;
    for (let a = 0; a < A; a++) {
      const lp = (logp[b * A + a] = logits[b * A + a]! - lse);
      ent -= Math.exp(lp) * lp;
    }
    entropy[b] = ent;
  }
  return { logp, entropy };
}

/** The scalar whose gradient the train graph returns: Σ_b g_b·logp_b[a_b] + c_b·H_b. */
export function referenceLoss(
  spec: PolicySpec,
  w: RefWeights,
  batch: RefBatch,
  actions: ArrayLike<number>,
  g: ArrayLike<number>,
  c: ArrayLike<number>
): number {
  const { logp, entropy } = referenceForward(spec, w, batch);
  const A = numActions(spec);
  let loss = 0;
  for (let b = 0; b < batch.batch; b++) loss += g[b]! * logp[b * A + actions[b]!]! + c[b]! * entropy[b]!;
  return loss;
}
