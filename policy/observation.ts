/**
 * Observation encoding for the embedded policy: screenshot PNG → [3,S,S] float32 in [0,1] (area average),
 * instruction → L2-normalised bag-of-words [V] (policy/vocabulary.ts), previous action → [2A] one-hot.
 * All are pure functions of their inputs, so a trajectory's stored PNGs, instruction and steps reproduce
 * the exact network input at training time.
 */
import { PNG } from 'pngjs';
import { IMAGE_CHANNELS, numActions, prevWidth, type PolicySpec } from './spec';
import { wordSlot } from './vocabulary';

export { fnv1a } from './vocabulary';

/**
 * Per-axis area weights: output cell o covers [o·n/m, (o+1)·n/m) of the input; each input pixel
 * contributes the length of its overlap, divided by the cell width (so weights sum to 1).
 * For 160 → 64 every cell spans 2.5 pixels. Flat typed arrays: taps of cell o are start[o]..start[o+1].
 */
interface AreaTaps {
  start: Int32Array;
  index: Int32Array;
  weight: Float64Array;
}

function areaWeights(n: number, m: number): AreaTaps {
  const scale = n / m;
  const start = new Int32Array(m + 1);
  const index: number[] = [];
  const weight: number[] = [];
  for (let o = 0; o < m; o++) {
    const lo = o * scale;
    const hi = (o + 1) * scale;
    for (let i = Math.floor(lo); i < Math.min(n, Math.ceil(hi)); i++) {
      const overlap = Math.min(hi, i + 1) - Math.max(lo, i);
      if (overlap > 1e-12) {
        index.push(i);
        weight.push(overlap / scale);
      }
    }
    start[o + 1] = index.length;
  }
  return { start, index: Int32Array.from(index), weight: Float64Array.from(weight) };
}

/** Screenshots of one env all have the same size: their weights are computed once. */
const tapsCache = new Map<string, AreaTaps>();
function cachedAreaWeights(n: number, m: number): AreaTaps {
  const key = `${n}:${m}`;
  let taps = tapsCache.get(key);
  if (!taps) {
    if (tapsCache.size >= 64) tapsCache.clear();
    taps = areaWeights(n, m);
    tapsCache.set(key, taps);
  }
  return taps;
}

/**
 * RGBA bytes (row-major, 4 per pixel, alpha ignored) → CHW float32 [3,size,size] in [0,1].
 * The arithmetic (products and sums in float64, in this order) is part of the encoding: trajectories
 * store PNGs and the trainer re-encodes them, so a change here must keep every result bit-identical.
 */
export function downsampleRgba(rgba: Uint8Array, width: number, height: number, size: number): Float32Array {
  if (rgba.length !== width * height * 4)
    throw new Error(`downsample: ${rgba.length} bytes for ${width}×${height} RGBA`);
  const wx = cachedAreaWeights(width, size);
  const wy = cachedAreaWeights(height, size);
  const out = new Float32Array(IMAGE_CHANNELS * size * size);
  const plane = size * size;
  for (let oy = 0; oy < size; oy++) {
    const y0 = wy.start[oy]!;
    const y1 = wy.start[oy + 1]!;
    for (let ox = 0; ox < size; ox++) {
      const x0 = wx.start[ox]!;
      const x1 = wx.start[ox + 1]!;
      let r = 0;
      let g = 0;
      let b = 0;
      for (let ty = y0; ty < y1; ty++) {
        const fy = wy.weight[ty]!;
        const row = wy.index[ty]! * width;
        for (let tx = x0; tx < x1; tx++) {
          const f = fy * wx.weight[tx]!;
          const p = (row + wx.index[tx]!) * 4;
          r += f * rgba[p]!;
          g += f * rgba[p + 1]!;
          b += f * rgba[p + 2]!;
        }
      }
      const o = oy * size + ox;
      out[o] = r / 255;
      out[plane + o] = g / 255;
      out[2 * plane + o] = b / 255;
    }
  }
  return out;
}

/** Decodes a PNG screenshot and downsamples it to the spec's input ([3,S,S], CHW). */
export function encodeScreenshot(png: Uint8Array, spec: Pick<PolicySpec, 'imageSize'>): Float32Array {
  const img = PNG.sync.read(Buffer.from(png.buffer, png.byteOffset, png.byteLength));
  return downsampleRgba(
    new Uint8Array(img.data.buffer, img.data.byteOffset, img.data.byteLength),
    img.width,
    img.height,
    spec.imageSize
  );
}

/** Lower-case word tokens (letters and digits; quotes and punctuation split words). */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Bag-of-words [V] over the spec's word slots, L2-normalised so instruction length does not change its scale. */
export function encodeInstruction(text: string, spec: Pick<PolicySpec, 'vocabSize' | 'textEncoding'>): Float32Array {
  const v = new Float32Array(spec.vocabSize);
  for (const word of tokenize(text)) v[wordSlot(word, spec.textEncoding, spec.vocabSize)]! += 1;
  let norm = 0;
  for (const x of v) norm += x * x;
  if (norm > 0) {
    const inv = 1 / Math.sqrt(norm);
    for (let i = 0; i < v.length; i++) v[i]! *= inv;
  }
  return v;
}

/** The action taken at the previous step of the episode, and whether the screen differs since. */
export interface PreviousAction {
  /** Index in the policy's action space (policy/action-space.ts). */
  actionIndex: number;
  /**
   * True when this step's screenshot differs from the previous step's (PNG bytes; the trainer compares
   * the content-addressed screenshot keys, i.e. the same bytes).
   */
  changed: boolean;
}

/**
 * The `prev` input [2A]: a 1 at actionIndex in the first half when the action changed the screen, in the
 * second half when it changed nothing; all zero on the first step (`null`/`undefined`).
 */
export function encodePreviousAction(
  previous: PreviousAction | null | undefined,
  spec: Pick<PolicySpec, 'gridSize'>
): Float32Array {
  const v = new Float32Array(prevWidth(spec));
  if (!previous) return v;
  const A = numActions(spec);
  const { actionIndex } = previous;
  if (!Number.isInteger(actionIndex) || actionIndex < 0 || actionIndex >= A)
    throw new RangeError(`previous action index ${actionIndex} is outside the ${A} actions`);
  v[(previous.changed ? 0 : A) + actionIndex] = 1;
  return v;
}
