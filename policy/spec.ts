/**
 * The one architecture spec of the embedded policy. Every generated artifact (forward ONNX graph,
 * forward+backward ONNX graph, weight init, checkpoint validation, the TS reference) is derived from a
 * PolicySpec, so a bigger variant is a different spec value, never different code.
 *
 * Network (default ≈24k parameters, reference/env-and-policy.md §B7):
 *   obs [B,3,64,64] → conv(3→16, 4×4 s2 p1) → ReLU → conv(16→32, 4×4 s2 p1) → ReLU → conv(32→32, 3×3 p1)
 *   → FiLM: z·(1+γ)+β with [γ,β] = film(textEmbed(text)) → ReLU → h [B,C,16,16]
 *   click head: 1×1 conv h → [B,1,16,16] → 256 logits; token head: GAP(h) → Gemm → 16 logits
 *   logits = concat(click, tokens) + mask (0 or −1e9) → LogSoftmax → logp [B,272]; entropy [B].
 */
import { z } from 'zod';
import type { ExpectedTensor } from '../storage/safetensors';

/** The 16 non-click actions, in logit order after the grid cells. Reserved slots are always masked. */
export const TOKEN_NAMES = [
  'type_field_0',
  'type_field_1',
  'type_field_2',
  'type_field_3',
  'key_enter',
  'key_tab',
  'key_backspace',
  'key_escape',
  'scroll_up',
  'scroll_down',
  'wait',
  'finished',
  'reserved_0',
  'reserved_1',
  'reserved_2',
  'reserved_3',
] as const;
export type TokenName = (typeof TOKEN_NAMES)[number];

/** Additive mask value for invalid actions: exp(−1e9 − max) underflows to exactly 0 in float32. */
export const MASK_OFF = -1e9;

export const ConvLayerSpecSchema = z.object({
  /** Output channels (the "width" of this layer). */
  outChannels: z.number().int().min(1).max(1024),
  /** Square kernel size. */
  kernel: z.number().int().min(1).max(11),
  /** Stride in both directions. */
  stride: z.number().int().min(1).max(4),
  /** Zero padding on every side. */
  pad: z.number().int().min(0).max(5),
});
export type ConvLayerSpec = z.infer<typeof ConvLayerSpecSchema>;

export const PolicySpecSchema = z.object({
  /** Bump when the meaning of the fields or the graph layout changes (checkpoints record it). */
  version: z.literal(1),
  /** Side of the square RGB observation in pixels (the screenshot is area-downsampled to it). */
  imageSize: z.number().int().min(8).max(512),
  /** Hashed bag-of-words buckets for the instruction (V). */
  vocabSize: z.number().int().min(1).max(65536),
  /**
   * Width E of the linear text embedding in front of the FiLM Gemm. FiLM(text) = W_f·(W_e·text) + b_f is a
   * rank-E factorisation of one Gemm over the text vector: with V=256 it costs V·E + E·2C ≈ 5k parameters
   * instead of V·2C ≈ 16k, which keeps the default net at ≈23-24k parameters.
   */
  textEmbed: z.number().int().min(1).max(1024),
  /**
   * The conv trunk (depth = length). ReLU follows every layer but the last, whose output is FiLM-modulated
   * and then ReLU'd. The last layer's spatial size must equal gridSize (it is the click grid).
   */
  convs: z.array(ConvLayerSpecSchema).min(1).max(16),
  /** Side of the click grid: gridSize² click cells, each cell's centre is a click target. */
  gridSize: z.number().int().min(1).max(64),
});
export type PolicySpec = z.infer<typeof PolicySpecSchema>;

export const defaultPolicySpec: PolicySpec = {
  version: 1,
  imageSize: 64,
  vocabSize: 256,
  textEmbed: 16,
  convs: [
    { outChannels: 16, kernel: 4, stride: 2, pad: 1 },
    { outChannels: 32, kernel: 4, stride: 2, pad: 1 },
    { outChannels: 32, kernel: 3, stride: 1, pad: 1 },
  ],
  gridSize: 16,
};

/** The same architecture with every conv's channel count multiplied (the "one setting" to scale up). */
export function widenSpec(spec: PolicySpec, factor: number): PolicySpec {
  return {
    ...spec,
    convs: spec.convs.map((c) => ({ ...c, outChannels: Math.max(1, Math.round(c.outChannels * factor)) })),
  };
}

export const IMAGE_CHANNELS = 3;
export const NUM_TOKENS = TOKEN_NAMES.length;

export const numCells = (spec: Pick<PolicySpec, 'gridSize'>): number => spec.gridSize * spec.gridSize;
export const numActions = (spec: Pick<PolicySpec, 'gridSize'>): number => numCells(spec) + NUM_TOKENS;
/** Channels C of the last conv (the FiLM'd feature map). */
export const trunkChannels = (spec: PolicySpec): number => spec.convs[spec.convs.length - 1]!.outChannels;

export interface ConvGeometry extends ConvLayerSpec {
  index: number;
  inChannels: number;
  inSize: number;
  outSize: number;
  /** Rows/cols of the input the forward conv never reads; ConvTranspose needs them back as output_padding. */
  outputPadding: number;
}

/** Per-layer shapes; throws if the trunk does not end at gridSize×gridSize. */
export function convGeometry(spec: PolicySpec): ConvGeometry[] {
  let inChannels = IMAGE_CHANNELS;
  let inSize = spec.imageSize;
  const layers = spec.convs.map((c, index) => {
    const span = inSize + 2 * c.pad - c.kernel;
    if (span < 0)
      throw new Error(`policy spec: conv${index} kernel ${c.kernel} larger than padded input ${inSize + 2 * c.pad}`);
    const outSize = Math.floor(span / c.stride) + 1;
    const g: ConvGeometry = { ...c, index, inChannels, inSize, outSize, outputPadding: span % c.stride };
    inChannels = c.outChannels;
    inSize = outSize;
    return g;
  });
  if (inSize !== spec.gridSize)
    throw new Error(`policy spec: conv trunk ends at ${inSize}×${inSize}, gridSize is ${spec.gridSize}`);
  return layers;
}

export function validateSpec(spec: unknown): PolicySpec {
  const parsed = PolicySpecSchema.parse(spec);
  convGeometry(parsed);
  return parsed;
}

export interface ParamShape {
  name: string;
  shape: number[];
  /** fan-in used by the initializer (inputs feeding one output unit). */
  fanIn: number;
}

/**
 * Every weight tensor, in a fixed order (graph inputs, gradient outputs and checkpoints all use it).
 * Gemm weights are [out, in]; conv weights are [out, in, k, k] (ONNX / PyTorch layouts).
 */
export function paramShapes(spec: PolicySpec): ParamShape[] {
  const out: ParamShape[] = [];
  for (const g of convGeometry(spec)) {
    const fanIn = g.inChannels * g.kernel * g.kernel;
    out.push({ name: `conv${g.index}.weight`, shape: [g.outChannels, g.inChannels, g.kernel, g.kernel], fanIn });
    out.push({ name: `conv${g.index}.bias`, shape: [g.outChannels], fanIn });
  }
  const c = trunkChannels(spec);
  out.push({ name: 'text.weight', shape: [spec.textEmbed, spec.vocabSize], fanIn: spec.vocabSize });
  out.push({ name: 'film.weight', shape: [2 * c, spec.textEmbed], fanIn: spec.textEmbed });
  out.push({ name: 'film.bias', shape: [2 * c], fanIn: spec.textEmbed });
  out.push({ name: 'click.weight', shape: [1, c, 1, 1], fanIn: c });
  out.push({ name: 'click.bias', shape: [1], fanIn: c });
  out.push({ name: 'token.weight', shape: [NUM_TOKENS, c], fanIn: c });
  out.push({ name: 'token.bias', shape: [NUM_TOKENS], fanIn: c });
  return out;
}

/** The expected tensors of a checkpoint, in the form storage/safetensors.checkTensorSpec takes. */
export function paramTensorSpec(spec: PolicySpec): Record<string, ExpectedTensor> {
  return Object.fromEntries(paramShapes(spec).map((p) => [p.name, { dtype: 'F32' as const, shape: p.shape }]));
}

export const sizeOf = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

export function paramCount(spec: PolicySpec): number {
  return paramShapes(spec).reduce((n, p) => n + sizeOf(p.shape), 0);
}

/** Canonical JSON of a spec (fixed key order) to record in checkpoints and compare on load. */
export function specKey(spec: PolicySpec): string {
  const { version, imageSize, vocabSize, textEmbed, convs, gridSize } = spec;
  return JSON.stringify({
    version,
    imageSize,
    vocabSize,
    textEmbed,
    convs: convs.map(({ outChannels, kernel, stride, pad }) => ({ outChannels, kernel, stride, pad })),
    gridSize,
  });
}
