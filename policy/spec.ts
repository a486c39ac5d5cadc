/**
 * The one architecture spec of the embedded policy. Every generated artifact (forward ONNX graph,
 * forward+backward ONNX graph, weight init, checkpoint validation, the TS reference) is derived from a
 * PolicySpec, so a bigger variant is a different spec value, never different code.
 *
 * Network (default ≈26k parameters, reference/env-and-policy.md §B7; spec version 3, issue 14):
 *   obs [B,3,64,64] → conv(3→16, 4×4 s2 p1) → ReLU → conv(16→32, 4×4 s2 p1) → ReLU → conv(32→32, 3×3 p1)
 *   → FiLM: z·(1+γ)+β with [γ,β] = film(textEmbed(text) + prevEmbed(prev)) → ReLU → h [B,C,16,16]
 *   click context (clickContext): h' = ReLU(h + Wr·rowMean(h) + Wc·colMean(h) + Wg·GAP(h) + b)
 *   click head: 1×1 conv h' → [B,1,16,16], plus the instruction query q·h'(cell) with q = W_q·embed (clickQuery)
 *   → 256 logits; token head: GAP(h) → Gemm → 16 logits
 *   logits = concat(click, tokens) + prevBias(prev) + mask (0 or −1e9) → LogSoftmax → logp [B,272]; entropy [B].
 *
 * Receptive field of a click logit: the conv trunk alone sees 4+3·2+2·4 = 18 input pixels of 64 (≈45 px of
 * the 160-px page). With clickContext it also sees its whole row and column of h (every 16-px-high band
 * across the page and every column band) and the global mean of h: the entire page, so e.g. the colour
 * swatch left of a focus-field input, or "all wanted boxes ticked" for a Submit click, reaches the logit.
 *
 * prev [B,2A] is the previous action as two one-hot halves: [changed the screen | changed nothing]
 * (all zero on the first step). It enters twice: as a direct additive logit bias per (condition, click
 * or token) — so a greedy policy can learn, and starts with a prior, not to repeat an action that did
 * nothing — and, pooled to (condition, click or token), through the FiLM embedding into the features.
 *
 * Instruction query (clickQuery, spec v3): FiLM alone lets the instruction reach a click logit only as a
 * product of small factors (γ ≈ 0.1 scales a channel, then ReLU, the context mix and a click weight ≈ 0.02),
 * and a weak BC start or RL's sparse signal never leaves that plateau: "click a box" is learned, "which
 * box" is not (docs/benchmarks.md, "click-colour under RL"). The query adds the text embedding's own
 * per-channel weight to the click head, so the colour word meets the colour features in the logit.
 */
import { z } from 'zod';
import type { ExpectedTensor } from '../storage/safetensors';
import { TEXT_ENCODINGS, vocabularyWords } from './vocabulary';
import { architectureOptionsOn, type ArchitectureOption } from './architecture-options';

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
  /**
   * Bump when the meaning of the fields or the graph layout changes (checkpoints record it). 2: the
   * instruction vocabulary, click context and previous-action input (issue 14); 3: the instruction query
   * of the click head (clickQuery). Checkpoints of an older version are refused with an explanation.
   */
  version: z.literal(3),
  /** Side of the square RGB observation in pixels (the screenshot is area-downsampled to it). */
  imageSize: z.number().int().min(8).max(512),
  /**
   * How instruction words map to the V text slots (policy/vocabulary.ts): `words-v1` gives every word
   * the task pages use its own slot, then V − |words| hashed out-of-vocabulary buckets; `hash` hashes all
   * words into V buckets (spec v1's encoding, with collisions such as tick/black and menu/cyan at V=256).
   */
  textEncoding: z.enum(TEXT_ENCODINGS),
  /** Width V of the instruction's bag-of-words input (named words + OOV buckets). */
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
  /** Row, column and global context of the feature map added before the click head (see above). */
  clickContext: z.boolean(),
  /** The previous action and whether it changed the screen as input `prev` [B,2A] (see above). */
  previousAction: z.boolean(),
  /**
   * Instruction-conditioned click head (spec v3): the click logit of a cell adds q·h'(cell), with the query
   * q = W_q·embed [C] from the same text (+ previous-action) embedding FiLM reads, i.e. the instruction
   * chooses which features make a cell clickable — a bilinear text×feature match straight into the logits.
   */
  clickQuery: z.boolean(),
  /**
   * Global max in the click context (needs clickContext): u also adds Σ_i W_m[c,i]·max_cells h[i], so a
   * feature present in one small spot (one named checkbox still unticked) reaches every click logit at full
   * strength instead of diluted by the 256-cell mean. Absent = off (every spec before it).
   */
  clickMaxContext: z.boolean().optional(),
  /**
   * Per-word click queries: the click logit of a cell also adds max(0, max_w W_w·h'(cell)) over the words w
   * of the instruction, each word with its own query row of W [V,C]. The summed query of clickQuery is
   * linear in the bag of words, so "tick yellow and purple" adds the yellow and the purple query and lights
   * every cell either partly matches; the max scores a cell by the one word it matches best. Absent = off.
   */
  clickWordQuery: z.boolean().optional(),
  /**
   * Four more input channels computed inside the graph from the RGB input: each pixel's hue angle θ as
   * (cos θ, sin θ, cos 2θ, sin 2θ), scaled down for unsaturated pixels (hueChannels below). Orange
   * (#f58231) is almost exactly the midpoint of red (#e6194b) and yellow (#ffe119) in RGB, so no linear
   * function of RGB scores it above both, and a conv trunk must first learn a bump-shaped colour feature;
   * on the hue circle every saturated colour is an extreme point, separable by one linear unit, and the
   * second harmonic doubles the angle between neighbours (orange–yellow 29° → 58°). Absent = off.
   */
  hueInput: z.boolean().optional(),
});
export type PolicySpec = z.infer<typeof PolicySpecSchema>;

export const defaultPolicySpec: PolicySpec = {
  version: 3,
  imageSize: 64,
  textEncoding: 'words-v1',
  // 63 named words + 65 OOV buckets; half of v1's 256 hashed buckets, so text.weight costs 2k, not 4k.
  vocabSize: 128,
  textEmbed: 16,
  convs: [
    { outChannels: 16, kernel: 4, stride: 2, pad: 1 },
    { outChannels: 32, kernel: 4, stride: 2, pad: 1 },
    { outChannels: 32, kernel: 3, stride: 1, pad: 1 },
  ],
  gridSize: 16,
  clickContext: true,
  previousAction: true,
  // On by default since the RL steps got their own, smaller learning rate (trainer.rlLearningRate 1e-3): at
  // the BC rate 3e-3 one train step moved the policy by up to ~10 nats of KL, the click entropy collapsed in
  // ~1,000 episodes and learning stopped — the 65 % → 1 % npm start run (docs/benchmarks.md, issue 14.3).
  clickQuery: true,
};

/** The default network, which has the instruction query of the click head (spec v3's new input path). */
export const clickQueryPolicySpec: PolicySpec = defaultPolicySpec;

/** Spec v2's network in the v3 format: the default without the click head's instruction query (A/B baseline). */
export const v2PolicySpec: PolicySpec = { ...defaultPolicySpec, clickQuery: false };

/**
 * Spec v1's network expressed in v3 (hashed 256-bucket text, no click context, no previous action, no
 * instruction query): the baseline of the issue-14 A/B (bench/learning.ts --ab). Same graph and parameter
 * count as v1.
 */
export const legacyPolicySpec: PolicySpec = {
  ...defaultPolicySpec,
  textEncoding: 'hash',
  vocabSize: 256,
  clickContext: false,
  previousAction: false,
  clickQuery: false,
};

/**
 * The default with the global max in the click context (clickMaxContext): for tasks whose right click
 * depends on whether some small element anywhere is still in a state (tick-checkboxes: Submit only when
 * no named box is left unticked; docs/benchmarks.md, "The whole suite").
 */
export const maxContextPolicySpec: PolicySpec = { ...defaultPolicySpec, clickMaxContext: true };

/**
 * The default with per-word click queries (clickWordQuery): for instructions that name several targets
 * (tick-checkboxes: "Tick yellow and purple"), where the summed query also lights the other colours.
 */
export const wordQueryPolicySpec: PolicySpec = { ...defaultPolicySpec, clickWordQuery: true };

/** The default with hue input channels (hueInput): for tasks that name colours (click-colour's orange, green). */
export const huePolicySpec: PolicySpec = { ...defaultPolicySpec, hueInput: true };

/** The same architecture with every conv's channel count multiplied (the "one setting" to scale up). */
export function widenSpec(spec: PolicySpec, factor: number): PolicySpec {
  return {
    ...spec,
    convs: spec.convs.map((c) => ({ ...c, outChannels: Math.max(1, Math.round(c.outChannels * factor)) })),
  };
}

/** A campaign's architecture settings (CampaignConfig policy.width and the ARCHITECTURE_OPTIONS). */
export type PolicyArchitecture = { width: number } & Partial<Record<ArchitectureOption, boolean>>;

/** The embedded network a campaign's settings select: the default, widened and/or with its options on. */
export function specForPolicy(arch: PolicyArchitecture): PolicySpec {
  const base: PolicySpec = { ...defaultPolicySpec, ...architectureOptionsOn(arch) };
  return arch.width === 1 ? base : widenSpec(base, arch.width);
}

/** Channels of the observation the network is fed (RGB), on the wire and in the graph's `obs` input. */
export const IMAGE_CHANNELS = 3;
/** Channels spec.hueInput adds inside the graph: each pixel's hue (cos θ, sin θ, cos 2θ, sin 2θ). */
export const HUE_CHANNELS = 4;
/**
 * Added to the chroma before the hue vector is divided by it: grey, white and black pixels (chroma ≈ 0) get
 * a vector ≈ 0 instead of an arbitrary direction, and the page's saturated colours (chroma 0.55–0.85 in
 * [0,1] units) one of length ≈ 0.85–0.9.
 */
export const HUE_EPSILON = 0.1;

/**
 * The hue channels of one RGB pixel in [0,1]: the opponent-colour axes x = (2R − G − B)/2 and
 * y = (√3/2)(G − B) (the RGB cube projected along the grey diagonal) divided by their length + HUE_EPSILON,
 * u = (x, y)/d ≈ (cos θ, sin θ), then its second harmonic (u_x² − u_y², 2·u_x·u_y) ≈ (cos 2θ, sin 2θ).
 * The graph (graph-forward.ts) and the TypeScript reference compute exactly this.
 */
export function hueChannels(r: number, g: number, b: number): [number, number, number, number] {
  const x = (2 * r - g - b) / 2;
  const y = (Math.sqrt(3) / 2) * (g - b);
  const d = Math.sqrt(x * x + y * y) + HUE_EPSILON;
  const ux = x / d;
  const uy = y / d;
  return [ux, uy, ux * ux - uy * uy, 2 * ux * uy];
}

/** Channels of the first conv's input: RGB, plus the hue vector with spec.hueInput. */
export const inputChannels = (spec: Pick<PolicySpec, 'hueInput'>): number =>
  IMAGE_CHANNELS + (spec.hueInput ? HUE_CHANNELS : 0);
export const NUM_TOKENS = TOKEN_NAMES.length;

export const numCells = (spec: Pick<PolicySpec, 'gridSize'>): number => spec.gridSize * spec.gridSize;
export const numActions = (spec: Pick<PolicySpec, 'gridSize'>): number => numCells(spec) + NUM_TOKENS;
/** Width of the `prev` input: one-hot previous action, [changed the screen | changed nothing]. */
export const prevWidth = (spec: Pick<PolicySpec, 'gridSize'>): number => 2 * numActions(spec);
/** Width of the pooled previous-action summary: per condition, [a click, token 0 … token 15]. */
export const PREV_SUMMARY = 2 * (1 + NUM_TOKENS);
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
  let inChannels = inputChannels(spec);
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
  const words = vocabularyWords(spec.textEncoding);
  if (spec.textEncoding !== 'hash' && spec.vocabSize <= words)
    throw new Error(
      `policy spec: vocabSize ${spec.vocabSize} leaves no out-of-vocabulary bucket after the ${words} words of ${spec.textEncoding}`
    );
  return layers;
}

export function validateSpec(spec: unknown): PolicySpec {
  const parsed = PolicySpecSchema.parse(spec);
  if (parsed.clickMaxContext && !parsed.clickContext)
    throw new Error('policy spec: clickMaxContext adds to the click context, so it needs clickContext: true');
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
  if (spec.previousAction) out.push({ name: 'prev.embed', shape: [spec.textEmbed, PREV_SUMMARY], fanIn: PREV_SUMMARY });
  out.push({ name: 'film.weight', shape: [2 * c, spec.textEmbed], fanIn: spec.textEmbed });
  out.push({ name: 'film.bias', shape: [2 * c], fanIn: spec.textEmbed });
  if (spec.clickContext) {
    // Row and column context as 1×1 convs over the [B,C,G,1] / [B,C,1,G] means, global as a Gemm.
    out.push({ name: 'ctx.row', shape: [c, c, 1, 1], fanIn: 3 * c });
    out.push({ name: 'ctx.col', shape: [c, c, 1, 1], fanIn: 3 * c });
    out.push({ name: 'ctx.global', shape: [c, c], fanIn: 3 * c });
    out.push({ name: 'ctx.bias', shape: [c], fanIn: 3 * c });
    // Zero at init (weights.ts): the same initial policy as without it for the same seed.
    if (spec.clickMaxContext) out.push({ name: 'ctx.max', shape: [c, c], fanIn: 3 * c });
  }
  out.push({ name: 'click.weight', shape: [1, c, 1, 1], fanIn: c });
  out.push({ name: 'click.bias', shape: [1], fanIn: c });
  if (spec.clickQuery) out.push({ name: 'query.weight', shape: [c, spec.textEmbed], fanIn: spec.textEmbed });
  // [V, C]: one query row per word slot; zero at init (weights.ts), like query.weight.
  if (spec.clickWordQuery) out.push({ name: 'wquery.weight', shape: [spec.vocabSize, c], fanIn: c });
  out.push({ name: 'token.weight', shape: [NUM_TOKENS, c], fanIn: c });
  out.push({ name: 'token.bias', shape: [NUM_TOKENS], fanIn: c });
  // [condition, click or token]: the logit bias for repeating the previous action (see weights.ts init).
  if (spec.previousAction) out.push({ name: 'prev.bias', shape: [2, 1 + NUM_TOKENS], fanIn: 1 });
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
  const {
    version,
    imageSize,
    textEncoding,
    vocabSize,
    textEmbed,
    convs,
    gridSize,
    clickContext,
    previousAction,
    clickQuery,
  } = spec;
  return JSON.stringify({
    version,
    imageSize,
    textEncoding,
    vocabSize,
    textEmbed,
    convs: convs.map(({ outChannels, kernel, stride, pad }) => ({ outChannels, kernel, stride, pad })),
    gridSize,
    clickContext,
    previousAction,
    clickQuery,
    // Only when on, so every spec from before the field keeps its key (checkpoints compare it on load).
    ...architectureOptionsOn(spec),
  });
}

/**
 * The pooling matrix S [2A, PREV_SUMMARY] from `prev` to its summary: row c·A + a has a single 1 at column
 * c·(1+T) + k, where k = 0 for a click cell and 1 + t for token t. `prev · S` is the summary the FiLM
 * embedding reads; `prev.bias` (flattened) · Sᵀ spreads the per-(condition, click|token) bias over all A.
 */
export function prevPooling(spec: Pick<PolicySpec, 'gridSize'>): Float32Array {
  const A = numActions(spec);
  const cells = numCells(spec);
  const s = new Float32Array(2 * A * PREV_SUMMARY);
  for (let c = 0; c < 2; c++)
    for (let a = 0; a < A; a++)
      s[(c * A + a) * PREV_SUMMARY + c * (1 + NUM_TOKENS) + (a < cells ? 0 : 1 + a - cells)] = 1;
  return s;
}
