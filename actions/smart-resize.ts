/**
 * Qwen2.5-VL / UI-TARS-1.5 image resizing ("smart resize"): both sides become multiples of `factor`
 * (28 = 14 px patches × 2×2 merge) and the pixel count is kept inside [minPixels, maxPixels] while the
 * aspect ratio is preserved as well as possible. UI-TARS-1.5 writes absolute pixel coordinates of this
 * resized image, so rendering and parsing its action text needs the exact same arithmetic.
 */

export const SMART_RESIZE_FACTOR = 28;
export const SMART_RESIZE_MIN_PIXELS = 100 * 28 * 28;
export const SMART_RESIZE_MAX_PIXELS = 16384 * 28 * 28;
/** Qwen's processor refuses extreme aspect ratios; so do we (a typed error, not a silent distortion). */
export const SMART_RESIZE_MAX_RATIO = 200;

export interface SmartResizeOptions {
  factor?: number;
  minPixels?: number;
  maxPixels?: number;
}

export interface Size {
  width: number;
  height: number;
}

// Python's round() is banker's rounding; the reference processor uses it, so mirror it exactly
// (e.g. 1078/28 = 38.5 rounds to 38, not 39).
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export function smartResize(height: number, width: number, opts: SmartResizeOptions = {}): Size {
  const factor = opts.factor ?? SMART_RESIZE_FACTOR;
  const minPixels = opts.minPixels ?? SMART_RESIZE_MIN_PIXELS;
  const maxPixels = opts.maxPixels ?? SMART_RESIZE_MAX_PIXELS;
  if (!(height > 0 && width > 0) || !Number.isFinite(height) || !Number.isFinite(width)) {
    throw new RangeError(`smartResize: image size must be positive, got ${width}×${height}`);
  }
  if (Math.max(height, width) / Math.min(height, width) > SMART_RESIZE_MAX_RATIO) {
    throw new RangeError(`smartResize: aspect ratio of ${width}×${height} exceeds ${SMART_RESIZE_MAX_RATIO}`);
  }
  let h = Math.max(factor, roundHalfEven(height / factor) * factor);
  let w = Math.max(factor, roundHalfEven(width / factor) * factor);
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return { width: w, height: h };
}
