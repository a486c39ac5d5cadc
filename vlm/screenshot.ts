/**
 * Screenshots resized the way UI-TARS sees them: Qwen smart-resize (sides multiples of 28, pixel count
 * within [minPixels, maxPixels], aspect ratio kept). Resizing on the client, with the same bounds the
 * coordinate space is computed from, makes UI-TARS-1.5's absolute pixels unambiguous: the server's
 * processor finds the image already at a smart-resized size and leaves it as it is (as long as its own
 * bounds admit that size), so the model's pixels are pixels of exactly this image.
 *
 * The resampling is a separable triangle (bilinear) filter whose support widens when shrinking, i.e.
 * antialiased like PIL's bilinear; the reference processor uses bicubic, which differs only in
 * interpolation detail, not in geometry.
 */
import { PNG } from 'pngjs';
import { smartResize, type SmartResizeOptions, type Size } from '../actions/smart-resize';

export interface ResizedScreenshot extends Size {
  png: Buffer;
  /** Whether the image was re-encoded (false: it already had the smart-resized size). */
  resized: boolean;
}

/** One axis of weights: for each output index, the input indices and their normalised weights. */
function axisWeights(inSize: number, outSize: number): { start: number[]; weights: Float32Array[] } {
  const scale = inSize / outSize;
  const support = Math.max(1, scale);
  const start: number[] = [];
  const weights: Float32Array[] = [];
  for (let o = 0; o < outSize; o++) {
    const centre = (o + 0.5) * scale - 0.5;
    const lo = Math.max(0, Math.ceil(centre - support));
    const hi = Math.min(inSize - 1, Math.floor(centre + support));
    const w = new Float32Array(Math.max(1, hi - lo + 1));
    let sum = 0;
    for (let i = lo; i <= hi; i++) {
      const v = Math.max(0, 1 - Math.abs(i - centre) / support);
      w[i - lo] = v;
      sum += v;
    }
    if (sum > 0) for (let k = 0; k < w.length; k++) w[k] = (w[k] ?? 0) / sum;
    else w[0] = 1; // only reachable for degenerate 1-pixel inputs
    start.push(sum > 0 ? lo : Math.min(inSize - 1, Math.max(0, Math.round(centre))));
    weights.push(w);
  }
  return { start, weights };
}

/** Resizes RGBA pixels (4 bytes per pixel) to `out` with the antialiased triangle filter. */
export function resizeRgba(data: Uint8Array, from: Size, out: Size): Uint8Array {
  const xs = axisWeights(from.width, out.width);
  const ys = axisWeights(from.height, out.height);
  // Horizontal pass into floats, then vertical pass into bytes.
  const mid = new Float32Array(out.width * from.height * 4);
  for (let y = 0; y < from.height; y++) {
    for (let ox = 0; ox < out.width; ox++) {
      const w = xs.weights[ox] as Float32Array;
      const s = xs.start[ox] as number;
      let r = 0;
      let g = 0;
      let b = 0;
      let a = 0;
      for (let k = 0; k < w.length; k++) {
        const p = (y * from.width + s + k) * 4;
        const wk = w[k] as number;
        r += (data[p] as number) * wk;
        g += (data[p + 1] as number) * wk;
        b += (data[p + 2] as number) * wk;
        a += (data[p + 3] as number) * wk;
      }
      const q = (y * out.width + ox) * 4;
      mid[q] = r;
      mid[q + 1] = g;
      mid[q + 2] = b;
      mid[q + 3] = a;
    }
  }
  const result = new Uint8Array(out.width * out.height * 4);
  for (let oy = 0; oy < out.height; oy++) {
    const w = ys.weights[oy] as Float32Array;
    const s = ys.start[oy] as number;
    for (let x = 0; x < out.width; x++) {
      for (let c = 0; c < 4; c++) {
        let v = 0;
        for (let k = 0; k < w.length; k++) v += (mid[((s + k) * out.width + x) * 4 + c] as number) * (w[k] as number);
        result[(oy * out.width + x) * 4 + c] = Math.max(0, Math.min(255, Math.round(v)));
      }
    }
  }
  return result;
}

/** PNG bytes → PNG bytes at the smart-resized size (unchanged bytes when the size already fits). */
export function smartResizePng(png: Uint8Array, opts: SmartResizeOptions = {}): ResizedScreenshot {
  const decoded = PNG.sync.read(Buffer.from(png.buffer, png.byteOffset, png.byteLength));
  const from = { width: decoded.width, height: decoded.height };
  const target = smartResize(from.height, from.width, opts);
  if (target.width === from.width && target.height === from.height) {
    return { png: Buffer.from(png.buffer, png.byteOffset, png.byteLength), ...target, resized: false };
  }
  const out = new PNG({ width: target.width, height: target.height });
  out.data = Buffer.from(resizeRgba(decoded.data, from, target).buffer);
  return { png: PNG.sync.write(out), ...target, resized: true };
}
