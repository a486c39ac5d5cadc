/**
 * ONNX forward graph of the policy, generated from a PolicySpec. `emitForward` is shared with the train
 * graph, which needs the intermediate values (pre-activations, FiLM factors, probabilities) for backprop.
 */
import { attr, GraphBuilder } from './onnx/builder';
import { convGeometry, IMAGE_CHANNELS, numActions, paramShapes, trunkChannels, type PolicySpec } from './spec';
import type { PolicyWeights } from './weights';

/** Graph input/output names, shared by the session wrappers. */
export const IO = {
  obs: 'obs',
  text: 'text',
  mask: 'mask',
  logp: 'logp',
  entropy: 'entropy',
  // train graph only
  onehot: 'onehot',
  g: 'g',
  entCoef: 'ent_coef',
  logpAction: 'logp_action',
  gradPrefix: 'grad.',
} as const;

export interface ForwardTrace {
  /** Input of conv i (obs for i = 0, then the ReLU outputs). */
  convIn: string[];
  /** Pre-activation output of conv i. */
  convOut: string[];
  textIn: string;
  embed: string; // [B,E]
  scale4: string; // 1+γ as [B,C,1,1]
  filmPre: string; // z·(1+γ)+β, before the ReLU
  h: string; // [B,C,G,G]
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
  mask: string
): ForwardTrace {
  const geo = convGeometry(spec);
  const c = trunkChannels(spec);
  const convIn: string[] = [];
  const convOut: string[] = [];
  let x = obs;
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
  const embed = b.gemm(text, w('text.weight'));
  const film = b.gemm(embed, w('film.weight'), w('film.bias'));
  const scale4 = b.unsqueeze(b.add(b.slice(film, 1, 0, c), b.scalar(1)), [2, 3]);
  const shift4 = b.unsqueeze(b.slice(film, 1, c, 2 * c), [2, 3]);
  const filmPre = b.add(b.mul(x, scale4), shift4);
  const h = b.op('Relu', [filmPre]);

  const click = b.op(
    'Flatten',
    [b.op('Conv', [h, w('click.weight'), w('click.bias')], { kernel_shape: attr.ints([1, 1]) })],
    { axis: attr.int(1) }
  );
  const pooled = b.op('Flatten', [b.op('GlobalAveragePool', [h])], { axis: attr.int(1) });
  const tokens = b.gemm(pooled, w('token.weight'), w('token.bias'));
  const logits = b.add(b.op('Concat', [click, tokens], { axis: attr.int(1) }), mask);
  const logp = b.op('LogSoftmax', [logits], { axis: attr.int(1) });
  const p = b.op('Exp', [logp]);
  // Masked entries have p = 0 exactly and a finite logp (≈ −1e9), so p·logp is 0, never NaN.
  const entropy = b.neg(b.reduceSum(b.mul(p, logp), [1], false));
  return { convIn, convOut, textIn: text, embed, scale4, filmPre, h, pooled, logp, p, entropy };
}

/** Declares the obs/text/mask inputs with a symbolic batch dimension. */
export function declareObservationInputs(
  b: GraphBuilder,
  spec: PolicySpec
): { obs: string; text: string; mask: string } {
  return {
    obs: b.input(IO.obs, 'float32', ['B', IMAGE_CHANNELS, spec.imageSize, spec.imageSize]),
    text: b.input(IO.text, 'float32', ['B', spec.vocabSize]),
    mask: b.input(IO.mask, 'float32', ['B', numActions(spec)]),
  };
}

/**
 * Inference graph: inputs obs [B,3,S,S], text [B,V], mask [B,A]; outputs logp [B,A] and entropy [B].
 * With `weights`, they are baked in as initializers (≈2× faster at small batch; the policy server rebuilds
 * the session per checkpoint). Without, every weight is a graph input (the trainer's recompute pass).
 */
export function buildForwardGraph(spec: PolicySpec, weights?: PolicyWeights): Uint8Array {
  const b = new GraphBuilder('dartflow_policy_forward');
  const { obs, text, mask } = declareObservationInputs(b, spec);
  for (const p of paramShapes(spec)) {
    if (weights) {
      const data = weights[p.name];
      if (!data) throw new Error(`buildForwardGraph: weight ${p.name} missing`);
      b.initializer(p.name, p.shape, data);
    } else {
      b.input(p.name, 'float32', p.shape);
    }
  }
  const t = emitForward(b, spec, (n) => n, obs, text, mask);
  b.output(t.logp, IO.logp, 'float32', ['B', numActions(spec)]);
  b.output(t.entropy, IO.entropy, 'float32', ['B']);
  return b.encode({ docString: `dartflow policy forward ${JSON.stringify(spec)}` });
}
