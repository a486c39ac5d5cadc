/**
 * The env worker now encodes screenshots for the policy server, and the trainer re-encodes stored PNGs:
 * the faster downsampler must give bit-identical results to the original one (kept here verbatim as
 * the reference), for the browser envs' 160×160 and for other screen sizes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { downsampleRgba } from '../../policy/observation';
import { mulberry32 } from '../../policy/sampling';

/** The original implementation (policy/observation.ts before the typed-array rewrite). */
function referenceDownsample(rgba: Uint8Array, width: number, height: number, size: number): Float32Array {
  const areaWeights = (n: number, m: number): Array<Array<[number, number]>> => {
    const scale = n / m;
    const out: Array<Array<[number, number]>> = [];
    for (let o = 0; o < m; o++) {
      const lo = o * scale;
      const hi = (o + 1) * scale;
      const taps: Array<[number, number]> = [];
      for (let i = Math.floor(lo); i < Math.min(n, Math.ceil(hi)); i++) {
        const overlap = Math.min(hi, i + 1) - Math.max(lo, i);
        if (overlap > 1e-12) taps.push([i, overlap / scale]);
      }
      out.push(taps);
    }
    return out;
  };
  const wx = areaWeights(width, size);
  const wy = areaWeights(height, size);
  const out = new Float32Array(3 * size * size);
  for (let oy = 0; oy < size; oy++) {
    for (let ox = 0; ox < size; ox++) {
      let r = 0;
      let g = 0;
      let b = 0;
      for (const [iy, fy] of wy[oy]!) {
        for (const [ix, fx] of wx[ox]!) {
          const f = fy * fx;
          const p = (iy * width + ix) * 4;
          r += f * rgba[p]!;
          g += f * rgba[p + 1]!;
          b += f * rgba[p + 2]!;
        }
      }
      const o = oy * size + ox;
      out[o] = r / 255;
      out[size * size + o] = g / 255;
      out[2 * size * size + o] = b / 255;
    }
  }
  return out;
}

describe('downsampleRgba', () => {
  it('is bit-identical to the reference for several screen and input sizes', () => {
    const cases: Array<[number, number, number]> = [
      [160, 160, 64],
      [1280, 720, 64],
      [37, 53, 64],
      [64, 64, 64],
      [100, 77, 32],
    ];
    const rng = mulberry32(4);
    for (const [w, h, s] of cases) {
      for (let rep = 0; rep < 2; rep++) {
        const rgba = Uint8Array.from({ length: w * h * 4 }, () => Math.floor(rng() * 256));
        const got = downsampleRgba(rgba, w, h, s);
        const want = referenceDownsample(rgba, w, h, s);
        assert.equal(got.length, 3 * s * s);
        assert.ok(
          Buffer.from(got.buffer).equals(Buffer.from(want.buffer)),
          `${w}×${h} → ${s}: differs from the reference`
        );
        assert.ok(got.some((v) => v > 0.1) && got.some((v) => v < 0.9), 'not a degenerate image');
      }
    }
  });

  it('refuses a buffer of the wrong length', () => {
    assert.throws(() => downsampleRgba(new Uint8Array(10), 4, 4, 2), /10 bytes for 4×4 RGBA/);
  });
});
