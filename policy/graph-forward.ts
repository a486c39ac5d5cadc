/**
 * ONNX forward graph of the policy, generated from a PolicySpec. `emitForward` is shared with the train
 * graph, which needs the intermediate values (pre-activations, FiLM factors, probabilities) for backprop.
 */
import { attr, GraphBuilder } from './onnx/builder';
import {
  convGeometry,
  HUE_EPSILON,
  IMAGE_CHANNELS,
  numActions,
  paramShapes,
  PREV_SUMMARY,
  prevPooling,
  prevWidth,
  trunkChannels,
  type PolicySpec,
} from './spec';
import type { PolicyWeights } from './weights';

/** Graph input/output names, shared by the session wrappers. */
export const IO = {
  obs: 'obs',
  text: 'text',
  mask: 'mask',
  prev: 'prev',
  logp: 'logp',
  entropy: 'entropy',
  // train graph only
  onehot: 'onehot',
  g: 'g',
  entCoef: 'ent_coef',
  logpAction: 'logp_action',
  gradPrefix: 'grad.',
} as const;

/**
 * obs [B,3,S,S] → [B,7,S,S]: RGB and each pixel's hue channels (spec.hueChannels: the opponent axes divided
 * by their length + HUE_EPSILON, then their second harmonic). Nothing trainable precedes it, so the train
 * graph needs no gradient through it.
 */
function withHueChannels(b: GraphBuilder, obs: string): string {
  const r = b.slice(obs, 1, 0, 1);
  const g = b.slice(obs, 1, 1, 2);
  const bl = b.slice(obs, 1, 2, 3);
  const x = b.mul(b.sub(b.sub(b.mul(r, b.scalar(2)), g), bl), b.scalar(0.5));
  const y = b.mul(b.sub(g, bl), b.scalar(Math.sqrt(3) / 2));
  const d = b.add(b.op('Sqrt', [b.add(b.mul(x, x), b.mul(y, y))]), b.scalar(HUE_EPSILON));
  const ux = b.op('Div', [x, d]);
  const uy = b.op('Div', [y, d]);
  const cos2 = b.sub(b.mul(ux, ux), b.mul(uy, uy));
  const sin2 = b.mul(b.mul(ux, uy), b.scalar(2));
  return b.op('Concat', [obs, ux, uy, cos2, sin2], { axis: attr.int(1) });
}

export interface ForwardTrace {
  /** Input of conv i (obs, with spec.hueInput its hue channels, for i = 0; then the ReLU outputs). */
  convIn: string[];
  /** Pre-activation output of conv i. */
  convOut: string[];
  textIn: string;
  /** Present when spec.previousAction: the prev input [B,2A], its summary [B,K] and the pooling matrix S. */
  prev?: { input: string; summary: string; pooling: string };
  embed: string; // [B,E]
  scale4: string; // 1+γ as [B,C,1,1]
  filmPre: string; // z·(1+γ)+β, before the ReLU
  h: string; // [B,C,G,G]
  /**
   * Present when spec.clickContext: row/column means of h and the pre-ReLU context sum u (+ with
   * spec.clickMaxContext the per-channel max of h over the cells, [B,C]).
   */
  ctx?: { rowMean: string; colMean: string; u: string; maxPooled?: string };
  /** The click head's input: ReLU(u) with click context, else h. */
  clickIn: string;
  /** Present when spec.clickQuery: the instruction query q = embed·W_qᵀ [B,C]. */
  query?: string;
  /**
   * Present when spec.clickWordQuery: clickIn as [B,C,N] (N = G²), every word slot's masked score plus the
   * zero floor [B,V+1,N], and their max over that axis [B,1,N] (what the click logits add).
   */
  wordQuery?: { flat: string; scores: string; best: string };
  pooled: string; // [B,C]
  logp: string; // [B,A]
  p: string; // [B,A]
  entropy: string; // [B]
}

export function emitForward(
  b: GraphBuilder,
  spec: PolicySpec,
  w: (name: string) => string,
  obs: string,
  text: string,
  mask: string,
  prevIn?: string
): ForwardTrace {
  const geo = convGeometry(spec);
  const c = trunkChannels(spec);
  const convIn: string[] = [];
  const convOut: string[] = [];
  let x = spec.hueInput ? withHueChannels(b, obs) : obs;
  for (const g of geo) {
    convIn.push(x);
    const z = b.op('Conv', [x, w(`conv${g.index}.weight`), w(`conv${g.index}.bias`)], {
      kernel_shape: attr.ints([g.kernel, g.kernel]),
      strides: attr.ints([g.stride, g.stride]),
      pads: attr.ints([g.pad, g.pad, g.pad, g.pad]),
    });
    convOut.push(z);
    x = g.index < geo.length - 1 ? b.op('Relu', [z]) : z;
  }
  // FiLM: one (factorised) Gemm over the text gives per-channel [γ, β]; scale is 1+γ so that a zero
  // text pathway leaves the visual features untouched.
  let embed = b.gemm(text, w('text.weight'));
  let prev: ForwardTrace['prev'];
  if (spec.previousAction) {
    if (!prevIn) throw new Error('emitForward: the spec has previousAction but no prev input was given');
    const pooling = b.initializer('const_prev_pooling', [prevWidth(spec), PREV_SUMMARY], prevPooling(spec));
    const summary = b.gemm(prevIn, pooling, undefined, { transB: false });
    prev = { input: prevIn, summary, pooling };
    embed = b.add(embed, b.gemm(summary, w('prev.embed')));
  }
  const film = b.gemm(embed, w('film.weight'), w('film.bias'));
  const scale4 = b.unsqueeze(b.add(b.slice(film, 1, 0, c), b.scalar(1)), [2, 3]);
  const shift4 = b.unsqueeze(b.slice(film, 1, c, 2 * c), [2, 3]);
  const filmPre = b.add(b.mul(x, scale4), shift4);
  const h = b.op('Relu', [filmPre]);
  const G = spec.gridSize;
  const pooled = b.op('Flatten', [b.op('GlobalAveragePool', [h])], { axis: attr.int(1) });

  // Click context: every cell gets its row's and column's mean features and the global mean (through
  // their own channel mixes), so a click logit sees the whole page instead of its 18-px receptive field.
  let clickIn = h;
  let ctx: ForwardTrace['ctx'];
  if (spec.clickContext) {
    const k1 = { kernel_shape: attr.ints([1, 1]) };
    const rowMean = b.mul(b.reduceSum(h, [3], true), b.scalar(1 / G)); // [B,C,G,1]
    const colMean = b.mul(b.reduceSum(h, [2], true), b.scalar(1 / G)); // [B,C,1,G]
    const row = b.op('Conv', [rowMean, w('ctx.row')], k1);
    const col = b.op('Conv', [colMean, w('ctx.col')], k1);
    let globVec = b.gemm(pooled, w('ctx.global'), w('ctx.bias')); // [B,C]
    let maxPooled: string | undefined;
    if (spec.clickMaxContext) {
      // The max, unlike the mean, is not diluted by the cells where a feature is absent.
      maxPooled = b.op('Flatten', [b.op('GlobalMaxPool', [h])], { axis: attr.int(1) }); // [B,C]
      globVec = b.add(globVec, b.gemm(maxPooled, w('ctx.max')));
    }
    const glob = b.unsqueeze(globVec, [2, 3]); // [B,C,1,1]
    const u = b.add(b.add(h, row), b.add(col, glob)); // broadcasts to [B,C,G,G]
    ctx = { rowMean, colMean, u, ...(maxPooled ? { maxPooled } : {}) };
    clickIn = b.op('Relu', [u]);
  }

  let clickMap = b.op('Conv', [clickIn, w('click.weight'), w('click.bias')], { kernel_shape: attr.ints([1, 1]) });
  let query: string | undefined;
  if (spec.clickQuery) {
    // Instruction query: logit(cell) += Σ_c q[c]·clickIn[c,cell], a per-sample 1×1 click weight from the text.
    query = b.gemm(embed, w('query.weight')); // [B,C]
    clickMap = b.add(clickMap, b.reduceSum(b.mul(clickIn, b.unsqueeze(query, [2, 3])), [1], true)); // [B,1,G,G]
  }
  let wordQuery: ForwardTrace['wordQuery'];
  if (spec.clickWordQuery) {
    // Per-word queries: score[w,cell] = W[w]·clickIn[cell] for every word slot; slots absent from the
    // instruction get −1e9, and a zero floor row keeps an instruction without words at +0.
    const N = G * G;
    const flat = b.reshape(clickIn, [0, c, N]); // [B,C,N]
    const raw = b.op('MatMul', [w('wquery.weight'), flat]); // [V,C]·[B,C,N] → [B,V,N]
    const present = b.op('Cast', [b.op('Greater', [text, b.scalar(0)])], { to: attr.int(1) }); // [B,V]
    const absentPenalty = b.unsqueeze(b.mul(b.sub(present, b.scalar(1)), b.scalar(1e9)), [2]); // [B,V,1]
    const floor = b.mul(b.slice(raw, 1, 0, 1), b.scalar(0)); // [B,1,N] zeros
    const scores = b.op('Concat', [b.add(raw, absentPenalty), floor], { axis: attr.int(1) }); // [B,V+1,N]
    const best = b.op('ReduceMax', [scores], { axes: attr.ints([1]), keepdims: attr.int(1) }); // [B,1,N]
    wordQuery = { flat, scores, best };
    clickMap = b.add(clickMap, b.reshape(best, [-1, 1, G, G]));
  }
  const click = b.op('Flatten', [clickMap], { axis: attr.int(1) });
  const tokens = b.gemm(pooled, w('token.weight'), w('token.bias'));
  let logits = b.op('Concat', [click, tokens], { axis: attr.int(1) });
  if (prev) {
    // Direct bias for the previous action: prev ⊙ (flatten(prev.bias) · Sᵀ), summed over the 2 conditions.
    const A = numActions(spec);
    const biasRow = b.gemm(b.reshape(w('prev.bias'), [1, PREV_SUMMARY]), prev.pooling); // [1,2A]
    const direct = b.reduceSum(b.reshape(b.mul(prev.input, biasRow), [-1, 2, A]), [1], false);
    logits = b.add(logits, direct);
  }
  logits = b.add(logits, mask);
  const logp = b.op('LogSoftmax', [logits], { axis: attr.int(1) });
  const p = b.op('Exp', [logp]);
  // Masked entries have p = 0 exactly and a finite logp (≈ −1e9), so p·logp is 0, never NaN.
  const entropy = b.neg(b.reduceSum(b.mul(p, logp), [1], false));
  return {
    convIn,
    convOut,
    textIn: text,
    prev,
    embed,
    scale4,
    filmPre,
    h,
    ctx,
    clickIn,
    query,
    wordQuery,
    pooled,
    logp,
    p,
    entropy,
  };
}

/** Declares the obs/text/mask (and, with spec.previousAction, prev) inputs with a symbolic batch dimension. */
export function declareObservationInputs(
  b: GraphBuilder,
  spec: PolicySpec
): { obs: string; text: string; mask: string; prev?: string } {
  return {
    obs: b.input(IO.obs, 'float32', ['B', IMAGE_CHANNELS, spec.imageSize, spec.imageSize]),
    text: b.input(IO.text, 'float32', ['B', spec.vocabSize]),
    mask: b.input(IO.mask, 'float32', ['B', numActions(spec)]),
    ...(spec.previousAction ? { prev: b.input(IO.prev, 'float32', ['B', prevWidth(spec)]) } : {}),
  };
}

/**
 * Inference graph: inputs obs [B,3,S,S], text [B,V], mask [B,A] (+ prev [B,2A]); outputs logp [B,A] and entropy [B].
 * With `weights`, they are baked in as initializers (≈2× faster at small batch; the policy server rebuilds
 * the session per checkpoint). Without, every weight is a graph input (the trainer's recompute pass).
 */
export function buildForwardGraph(spec: PolicySpec, weights?: PolicyWeights): Uint8Array {
  const b = new GraphBuilder('dartflow_policy_forward');
  const { obs, text, mask, prev } = declareObservationInputs(b, spec);
  for (const p of paramShapes(spec)) {
    if (weights) {
      const data = weights[p.name];
      if (!data) throw new Error(`buildForwardGraph: weight ${p.name} missing`);
      b.initializer(p.name, p.shape, data);
    } else {
      b.input(p.name, 'float32', p.shape);
    }
  }
  const t = emitForward(b, spec, (n) => n, obs, text, mask, prev);
  b.output(t.logp, IO.logp, 'float32', ['B', numActions(spec)]);
  b.output(t.entropy, IO.entropy, 'float32', ['B']);
  return b.encode({ docString: `dartflow policy forward ${JSON.stringify(spec)}` });
}
