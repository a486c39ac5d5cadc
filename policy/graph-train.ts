/**
 * ONNX forward+backward graph (reference/env-and-policy.md §B5), weights as graph inputs (ORT-node
 * ignores overridable initializers, so weights can only be fed as inputs).
 *
 * It returns the gradient of the per-batch scalar
 *     L = Σ_b ( g_b · logp_b[a_b] + c_b · H_b )
 * w.r.t. every weight, where g and c are per-sample coefficients computed by the trainer in JS:
 *   g_b = ∂loss/∂logp_b[a_b]   (BC: −1/N; PPO/GRPO: −A·w·ratio/N where unclipped, 0 where clipped;
 *                               k3 KL β·(r − log r − 1), r = exp(logp_ref − logp): adds β·(1 − r)/N)
 *   c_b = ∂loss/∂H_b           (an entropy bonus α: −α/N; 0 for steps the entropy filter drops)
 * Any loss that depends on the network only through logp[a] and H is expressible this way, because
 * ∂L/∂logits = g·(onehot − p) + c·(−p·(logp + H)) and the rest is the chain rule through the net.
 *
 * Inputs: obs, text, mask (+ prev), onehot [B,A] (taken action), g [B], ent_coef [B], and every weight.
 * Outputs: logp_action [B], entropy [B], and `grad.<weight name>` for every weight (same shape).
 */
import { attr, GraphBuilder } from './onnx/builder';
import { declareObservationInputs, emitForward, IO } from './graph-forward';
import {
  convGeometry,
  numActions,
  numCells,
  paramShapes,
  PREV_SUMMARY,
  trunkChannels,
  type ConvGeometry,
  type PolicySpec,
} from './spec';

/** dReLU: dy · 1[x > 0] with standard ops only. */
function reluBackward(b: GraphBuilder, dy: string, x: string): string {
  return b.mul(dy, b.op('Cast', [b.op('Greater', [x, b.scalar(0)])], { to: attr.int(1) }));
}

/**
 * dW of a conv as another conv: batch becomes the channel axis, and dY (stride-dilated) is the kernel.
 * out[i,o,u,v] = Σ_b Σ_{y,x} Xpad[b,i,u+s·y,v+s·x]·dY[b,o,y,x] — exactly dW[o,i,u,v] after a transpose.
 * When the forward conv skipped trailing rows (outputPadding > 0) the result is larger than k×k: crop.
 */
function convWeightGrad(b: GraphBuilder, g: ConvGeometry, x: string, dz: string): string {
  let dw = b.op('Conv', [b.transpose(x, [1, 0, 2, 3]), b.transpose(dz, [1, 0, 2, 3])], {
    pads: attr.ints([g.pad, g.pad, g.pad, g.pad]),
    dilations: attr.ints([g.stride, g.stride]),
  });
  if (g.outputPadding > 0) dw = b.slice(b.slice(dw, 2, 0, g.kernel), 3, 0, g.kernel);
  return b.transpose(dw, [1, 0, 2, 3]);
}

/** dX of a conv: the transposed conv with the forward weight, strides and pads. */
function convInputGrad(b: GraphBuilder, g: ConvGeometry, dz: string, w: string): string {
  return b.op('ConvTranspose', [dz, w], {
    kernel_shape: attr.ints([g.kernel, g.kernel]),
    strides: attr.ints([g.stride, g.stride]),
    pads: attr.ints([g.pad, g.pad, g.pad, g.pad]),
    output_padding: attr.ints([g.outputPadding, g.outputPadding]),
  });
}

export function buildTrainGraph(spec: PolicySpec): Uint8Array {
  const b = new GraphBuilder('dartflow_policy_train');
  const A = numActions(spec);
  const cells = numCells(spec);
  const C = trunkChannels(spec);
  const G = spec.gridSize;
  const geo = convGeometry(spec);
  const params = paramShapes(spec);

  const { obs, text, mask, prev } = declareObservationInputs(b, spec);
  const onehot = b.input(IO.onehot, 'float32', ['B', A]);
  const gCoef = b.input(IO.g, 'float32', ['B']);
  const cCoef = b.input(IO.entCoef, 'float32', ['B']);
  for (const p of params) b.input(p.name, 'float32', p.shape);
  const t = emitForward(b, spec, (n) => n, obs, text, mask, prev);

  const grads = new Map<string, string>();
  // Loss head: dL/dlogits = g·(onehot − p) + c·(−p·(logp + H)).
  const g1 = b.unsqueeze(gCoef, [1]);
  const c1 = b.unsqueeze(cCoef, [1]);
  const h1 = b.unsqueeze(t.entropy, [1]);
  const dPolicy = b.mul(g1, b.sub(onehot, t.p));
  const dEntropy = b.mul(c1, b.neg(b.mul(t.p, b.add(t.logp, h1))));
  const dlogits = b.add(dPolicy, dEntropy);

  if (t.prev) {
    // Direct bias: logits += Σ_c prev[:,c,:] ⊙ biasRow[c,:], biasRow = flatten(prev.bias)·Sᵀ.
    // dbiasRow = Σ_b prev ⊙ [dlogits | dlogits]; d flatten(prev.bias) = dbiasRow · S.
    const dl2 = b.op('Concat', [dlogits, dlogits], { axis: attr.int(1) });
    const dBiasRow = b.reduceSum(b.mul(t.prev.input, dl2), [0], true); // [1,2A]
    const dBias = b.gemm(dBiasRow, t.prev.pooling, undefined, { transB: false }); // [1,K]
    grads.set('prev.bias', b.reshape(dBias, [2, PREV_SUMMARY / 2]));
  }

  // Token head: tokens = pooled·Wtᵀ + bt.
  const dtok = b.slice(dlogits, 1, cells, A);
  grads.set('token.weight', b.gemm(dtok, t.pooled, undefined, { transA: true, transB: false }));
  grads.set('token.bias', b.reduceSum(dtok, [0], false));
  const dpooled = b.gemm(dtok, 'token.weight', undefined, { transB: false });

  // Click head: a 1×1 conv, so the generic conv gradients apply.
  const oneByOne = (outChannels: number): ConvGeometry => ({
    index: -1,
    outChannels,
    kernel: 1,
    stride: 1,
    pad: 0,
    inChannels: C,
    inSize: G,
    outSize: G,
    outputPadding: 0,
  });
  const clickGeo = oneByOne(1);
  const dclick = b.reshape(b.slice(dlogits, 1, 0, cells), [-1, 1, G, G]);
  grads.set('click.weight', convWeightGrad(b, clickGeo, t.clickIn, dclick));
  grads.set('click.bias', b.reduceSum(dclick, [0, 2, 3], false));
  let dClickIn = convInputGrad(b, clickGeo, dclick, 'click.weight');
  // Instruction query: click += Σ_c q[c]·clickIn[c] → dq = Σ_cells dclick·clickIn, dclickIn += dclick·q.
  let dembedQuery: string | undefined;
  if (t.query) {
    const dq = b.reduceSum(b.mul(dclick, t.clickIn), [2, 3], false); // [B,C]
    grads.set('query.weight', b.gemm(dq, t.embed, undefined, { transA: true, transB: false })); // [C,E]
    dembedQuery = b.gemm(dq, 'query.weight', undefined, { transB: false }); // [B,E]
    dClickIn = b.add(dClickIn, b.mul(dclick, b.unsqueeze(t.query, [2, 3])));
  }

  if (t.wordQuery) {
    // best = max over [masked word scores | 0]; the gradient goes to the entries holding the max (split
    // among ties, e.g. every word and the floor at init), then through score = W·flat.
    const { flat, scores, best } = t.wordQuery;
    const V = spec.vocabSize;
    const isMax = b.op('Cast', [b.op('Equal', [scores, best])], { to: attr.int(1) }); // [B,V+1,N]
    const share = b.op('Div', [isMax, b.reduceSum(isMax, [1], true)]);
    const dScores = b.slice(b.mul(share, b.reshape(dclick, [0, 1, G * G])), 1, 0, V); // [B,V,N]
    // dW[w,c] = Σ_b Σ_n dScores[b,w,n]·flat[b,c,n]; dflat = Wᵀ·dScores.
    const dW = b.reduceSum(b.op('MatMul', [dScores, b.transpose(flat, [0, 2, 1])]), [0], false); // [V,C]
    grads.set('wquery.weight', dW);
    const dFlat = b.op('MatMul', [b.transpose('wquery.weight', [1, 0]), dScores]); // [B,C,N]
    dClickIn = b.add(dClickIn, b.reshape(dFlat, [-1, C, G, G]));
  }

  let dhClick = dClickIn;
  let dpooledAll = dpooled;
  if (t.ctx) {
    // clickIn = relu(u), u = h + row(rowMean) + col(colMean) + (pooled·Wgᵀ + b) broadcast over [G,G].
    // The 1×1 convs' weight/input gradients are shape-generic, so they apply to the [G,1] / [1,G] maps.
    const ctxGeo = oneByOne(C);
    const du = reluBackward(b, dClickIn, t.ctx.u);
    const dRow = b.reduceSum(du, [3], true); // [B,C,G,1]
    const dCol = b.reduceSum(du, [2], true); // [B,C,1,G]
    const dGlob = b.reduceSum(du, [2, 3], false); // [B,C]
    grads.set('ctx.row', convWeightGrad(b, ctxGeo, t.ctx.rowMean, dRow));
    grads.set('ctx.col', convWeightGrad(b, ctxGeo, t.ctx.colMean, dCol));
    grads.set('ctx.global', b.gemm(dGlob, t.pooled, undefined, { transA: true, transB: false }));
    grads.set('ctx.bias', b.reduceSum(dGlob, [0], false));
    // Each mean spreads its gradient evenly (1/G) along the reduced axis; Add broadcasts it back.
    const dRowMean = b.mul(convInputGrad(b, ctxGeo, dRow, 'ctx.row'), b.scalar(1 / G));
    const dColMean = b.mul(convInputGrad(b, ctxGeo, dCol, 'ctx.col'), b.scalar(1 / G));
    dhClick = b.add(du, b.add(dRowMean, dColMean));
    if (t.ctx.maxPooled) {
      // glob += maxPooled·W_mᵀ; the max passes its gradient to the cells holding it (split among ties).
      grads.set('ctx.max', b.gemm(dGlob, t.ctx.maxPooled, undefined, { transA: true, transB: false }));
      const dMax = b.unsqueeze(b.gemm(dGlob, 'ctx.max', undefined, { transB: false }), [2, 3]); // [B,C,1,1]
      const isMax = b.op('Cast', [b.op('Equal', [t.h, b.unsqueeze(t.ctx.maxPooled, [2, 3])])], { to: attr.int(1) });
      const share = b.op('Div', [isMax, b.reduceSum(isMax, [2, 3], true)]);
      dhClick = b.add(dhClick, b.mul(share, dMax));
    }
    dpooledAll = b.add(dpooled, b.gemm(dGlob, 'ctx.global', undefined, { transB: false }));
  }
  // Global average pool spreads dpooled evenly over the G×G positions (broadcast add below).
  const dhPool = b.mul(b.unsqueeze(dpooledAll, [2, 3]), b.scalar(1 / (G * G)));
  const dh = b.add(dhClick, dhPool);

  // FiLM + ReLU: h = relu(z·s + β), s = 1+γ.
  const dy = reluBackward(b, dh, t.filmPre);
  const zLast = t.convOut[geo.length - 1]!;
  const dgamma = b.reduceSum(b.mul(dy, zLast), [2, 3], false);
  const dbeta = b.reduceSum(dy, [2, 3], false);
  const dfilm = b.op('Concat', [dgamma, dbeta], { axis: attr.int(1) });
  grads.set('film.weight', b.gemm(dfilm, t.embed, undefined, { transA: true, transB: false }));
  grads.set('film.bias', b.reduceSum(dfilm, [0], false));
  const dembedFilm = b.gemm(dfilm, 'film.weight', undefined, { transB: false });
  const dembed = dembedQuery ? b.add(dembedFilm, dembedQuery) : dembedFilm;
  grads.set('text.weight', b.gemm(dembed, t.textIn, undefined, { transA: true, transB: false }));
  if (t.prev) grads.set('prev.embed', b.gemm(dembed, t.prev.summary, undefined, { transA: true, transB: false }));

  // Conv trunk, last to first.
  let dz = b.mul(dy, t.scale4);
  for (let i = geo.length - 1; i >= 0; i--) {
    const g = geo[i]!;
    grads.set(`conv${i}.weight`, convWeightGrad(b, g, t.convIn[i]!, dz));
    grads.set(`conv${i}.bias`, b.reduceSum(dz, [0, 2, 3], false));
    if (i > 0) dz = reluBackward(b, convInputGrad(b, g, dz, `conv${i}.weight`), t.convOut[i - 1]!);
  }

  b.output(b.reduceSum(b.mul(onehot, t.logp), [1], false), IO.logpAction, 'float32', ['B']);
  b.output(t.entropy, IO.entropy, 'float32', ['B']);
  for (const p of params) {
    const grad = grads.get(p.name);
    if (!grad) throw new Error(`buildTrainGraph: no gradient for ${p.name}`);
    b.output(grad, IO.gradPrefix + p.name, 'float32', p.shape);
  }
  return b.encode({ docString: `dartflow policy forward+backward ${JSON.stringify(spec)}` });
}
