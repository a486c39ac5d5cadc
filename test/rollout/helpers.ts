/** Shared fixtures of the rollout tests: synthetic screenshots and a policy server on a throwaway bucket. */
import { PNG } from 'pngjs';
import { mulberry32 } from '../../policy/sampling';

/** A deterministic 160×160 (by default) PNG: colored boxes on a light background. */
export function makePng(seed: number, width = 160, height = 160): Buffer {
  const png = new PNG({ width, height });
  const rng = mulberry32(seed);
  png.data.fill(240);
  for (let b = 0; b < 3; b++) {
    const x0 = Math.floor(rng() * (width - 30));
    const y0 = Math.floor(rng() * (height - 30));
    const [r, g, bl] = [rng() * 255, rng() * 255, rng() * 255].map(Math.floor) as [number, number, number];
    for (let y = y0; y < y0 + 24; y++) {
      for (let x = x0; x < x0 + 24; x++) {
        const p = (y * width + x) * 4;
        png.data[p] = r;
        png.data[p + 1] = g;
        png.data[p + 2] = bl;
        png.data[p + 3] = 255;
      }
    }
  }
  for (let i = 3; i < png.data.length; i += 4) png.data[i] = 255;
  return PNG.sync.write(png);
}

export const TEST_TOKEN = 'test-token-0123456789abcdef';

export const observation = (seed: number, instruction = 'click on the red box', fields: string[] = []) => ({
  pngBase64: makePng(seed).toString('base64'),
  instruction,
  fields,
});
