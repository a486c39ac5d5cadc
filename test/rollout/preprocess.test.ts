/** Screenshot preprocessing on worker threads gives bit-identical inputs to the inline encoder. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeScreenshot } from '../../policy/observation';
import { defaultPolicySpec } from '../../policy/spec';
import { threadPreprocessor } from '../../rollout/preprocess';
import { runPreprocessJob } from '../../rollout/preprocess-worker';
import { makePng } from './helpers';

describe('preprocessing pool', () => {
  it('worker threads produce exactly the inline encoding, and a bad PNG fails only its own job', async () => {
    const pool = threadPreprocessor(2);
    const S = defaultPolicySpec.imageSize;
    try {
      const pngs = Array.from({ length: 12 }, (_, i) => makePng(i));
      const out = await Promise.all(pngs.map((p) => pool.encode(p, S)));
      out.forEach((o, i) => assert.deepEqual(o, encodeScreenshot(pngs[i]!, defaultPolicySpec)));
      // Each job carries its own input side (a server's network can change between reloads).
      assert.deepEqual(await pool.encode(pngs[1]!, 32), encodeScreenshot(pngs[1]!, { imageSize: 32 }));
      await assert.rejects(pool.encode(Buffer.from('not a png'), S), Error);
      assert.deepEqual(await pool.encode(pngs[0]!, S), out[0], 'the pool still works');
    } finally {
      await pool.close();
    }
  });

  it('runPreprocessJob reports errors as values', () => {
    const r = runPreprocessJob({ id: 3, png: new Uint8Array([1, 2, 3]), imageSize: 64 });
    assert.equal(r.id, 3);
    assert.ok('error' in r);
  });
});
