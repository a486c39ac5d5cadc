/**
 * An independent plain-TypeScript forward pass in float64, written from the architecture description
 * (not from the ONNX graph code). Tests only: it checks the generated forward graph and serves as the
 * float64 loss for finite-difference checks of the generated backward graph.
 */
import {
  convGeometry,
  HUE_CHANNELS,
  hueChannels,
  IMAGE_CHANNELS,
  inputChannels,
  numActions,
  numCells,
  NUM_TOKENS,
  trunkChannels,
  type PolicySpec,
} from './spec';

export type RefWeights = Record<string, ArrayLike<number>>;

export interface RefBatch {
  batch: number;
  obs: ArrayLike<number>; // [B,3,S,S]
  text: ArrayLike<number>; // [B,V]
  mask: ArrayLike<number>; // [B,A]
  /** [B,2A] previous action (required when spec.previousAction; absent = zeros). */
  prev?: ArrayLike<number>;
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

/**
 * relu(h[c,y,x] + Σ_i Wr[c,i]·mean_x' h[i,y,x'] + Σ_i Wc[c,i]·mean_y' h[i,y',x] + Σ_i Wg[c,i]·mean h[i] + b[c]),
 * + Σ_i Wm[c,i]·max h[i] inside the ReLU with spec.clickMaxContext.
 */
function clickContext(spec: PolicySpec, w: RefWeights, h: Float64Array, pooled: Float64Array, B: number): Float64Array {
  const C = trunkChannels(spec);
  const G = spec.gridSize;
  const wr = get(w, 'ctx.row');
  const wc = get(w, 'ctx.col');
  const wg = get(w, 'ctx.global');
  const bias = get(w, 'ctx.bias');
  const wm = spec.clickMaxContext ? get(w, 'ctx.max') : undefined;
  const out = new Float64Array(h.length);
  const at = (b: number, c: number, y: number, x: number): number => ((b * C + c) * G + y) * G + x;
  for (let b = 0; b < B; b++) {
    const rowMean = new Float64Array(C * G);
    const colMean = new Float64Array(C * G);
    for (let i = 0; i < C; i++)
      for (let y = 0; y < G; y++)
        for (let x = 0; x < G; x++) {
          rowMean[i * G + y]! += h[at(b, i, y, x)]! / G;
          colMean[i * G + x]! += h[at(b, i, y, x)]! / G;
        }
    const max = new Float64Array(C).fill(-Infinity);
    for (let i = 0; i < C; i++)
      for (let y = 0; y < G; y++) for (let x = 0; x < G; x++) max[i] = Math.max(max[i]!, h[at(b, i, y, x)]!);
    for (let c = 0; c < C; c++) {
      let g = bias[c]!;
      for (let i = 0; i < C; i++) g += wg[c * C + i]! * pooled[b * C + i]!;
      if (wm) for (let i = 0; i < C; i++) g += wm[c * C + i]! * max[i]!;
      for (let y = 0; y < G; y++) {
        let r = 0;
        for (let i = 0; i < C; i++) r += wr[c * C + i]! * rowMean[i * G + y]!;
        for (let x = 0; x < G; x++) {
          let col = 0;
          for (let i = 0; i < C; i++) col += wc[c * C + i]! * colMean[i * G + x]!;
          out[at(b, c, y, x)] = Math.max(0, h[at(b, c, y, x)]! + r + col + g);
        }
      }
    }
  }
  return out;
}

/** obs [B,3,S,S] → [B,7,S,S]: RGB then each pixel's hue channels (spec.hueChannels), as the graph's hue input. */
function withHue(obs: ArrayLike<number>, B: number, S: number): Float64Array {
  const n = S * S;
  const C = IMAGE_CHANNELS + HUE_CHANNELS;
  const out = new Float64Array(B * C * n);
  for (let b = 0; b < B; b++) {
    const src = b * IMAGE_CHANNELS * n;
    const dst = b * C * n;
    for (let i = 0; i < n; i++) {
      const hue = hueChannels(obs[src + i]!, obs[src + n + i]!, obs[src + 2 * n + i]!);
      for (let c = 0; c < IMAGE_CHANNELS; c++) out[dst + c * n + i] = obs[src + c * n + i]!;
      hue.forEach((v, k) => (out[dst + (IMAGE_CHANNELS + k) * n + i] = v));
    }
  }
  return out;
}

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
  let x: ArrayLike<number> = spec.hueInput ? withHue(batch.obs, B, spec.imageSize) : batch.obs;
  let ch = inputChannels(spec);
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
  // Previous action, written from the description (not via the pooling matrix): for each sample, the
  // condition c (0 changed, 1 unchanged) and the slot k (0 click, 1+t token t) of its one-hot entry.
  const cells = numCells(spec);
  const slotOf = (a: number): number => (a < cells ? 0 : 1 + a - cells);
  const K1 = 1 + NUM_TOKENS;
  const prevHits: Array<Array<{ c: number; a: number }>> = [];
  for (let b = 0; b < B; b++) {
    const hits: Array<{ c: number; a: number }> = [];
    if (spec.previousAction && batch.prev) {
      for (let c = 0; c < 2; c++)
        for (let a = 0; a < A; a++) {
          const v = batch.prev[b * 2 * A + c * A + a]!;
          if (v === 1) hits.push({ c, a });
          else if (v !== 0) throw new Error(`reference: prev values must be 0 or 1, got ${v}`);
        }
    }
    prevHits.push(hits);
  }
  // FiLM
  const e = linear(batch.text, B, spec.vocabSize, get(w, 'text.weight'), null, spec.textEmbed);
  if (spec.previousAction) {
    const pe = get(w, 'prev.embed');
    for (let b = 0; b < B; b++)
      for (const { c, a } of prevHits[b]!)
        for (let i = 0; i < spec.textEmbed; i++) e[b * spec.textEmbed + i]! += pe[i * 2 * K1 + c * K1 + slotOf(a)]!;
  }
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
  // Global mean (token head and click context)
  const pooled = new Float64Array(B * C);
  for (let b = 0; b < B; b++)
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let j = 0; j < G * G; j++) s += h[(b * C + c) * G * G + j]!;
      pooled[b * C + c] = s / (G * G);
    }
  const clickIn = spec.clickContext ? clickContext(spec, w, h, pooled, B) : h;
  // Heads
  const cw = get(w, 'click.weight');
  const cb = get(w, 'click.bias')[0]!;
  // Instruction query (clickQuery): the text embedding gives a per-sample addition to the click weight.
  const q = spec.clickQuery ? linear(e, B, spec.textEmbed, get(w, 'query.weight'), null, C) : null;
  const logits = new Float64Array(B * A);
  for (let b = 0; b < B; b++) {
    for (let j = 0; j < G * G; j++) {
      let acc = cb;
      for (let c = 0; c < C; c++) acc += (cw[c]! + (q ? q[b * C + c]! : 0)) * clickIn[(b * C + c) * G * G + j]!;
      logits[b * A + j] = acc;
    }
  }
  if (spec.clickWordQuery) {
    // Per-word queries: + max(0, max over the instruction's words w of Σ_c W[w,c]·clickIn[c,cell]).
    const wq = get(w, 'wquery.weight');
    for (let b = 0; b < B; b++) {
      const words: number[] = [];
      for (let v = 0; v < spec.vocabSize; v++) if (batch.text[b * spec.vocabSize + v]! > 0) words.push(v);
      for (let j = 0; j < G * G; j++) {
        let best = 0;
        for (const v of words) {
          let score = 0;
          for (let c = 0; c < C; c++) score += wq[v * C + c]! * clickIn[(b * C + c) * G * G + j]!;
          best = Math.max(best, score);
        }
        logits[b * A + j]! += best;
      }
    }
  }
  const tokens = linear(pooled, B, C, get(w, 'token.weight'), get(w, 'token.bias'), A - G * G);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < A - G * G; t++) logits[b * A + G * G + t] = tokens[b * (A - G * G) + t]!;
  if (spec.previousAction) {
    // The previous action's own logit gets the bias of its (condition, click|token) slot.
    const pb = get(w, 'prev.bias');
    for (let b = 0; b < B; b++) for (const { c, a } of prevHits[b]!) logits[b * A + a]! += pb[c * K1 + slotOf(a)]!;
  }
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
