/**
 * The env worker's cache of encoded screenshots: a hit gives exactly what encoding the bytes again
 * gives, the key is the content and the input size (not the array object), and the least recently used
 * entry goes first when the cache is full.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeScreenshotImage } from '../../rollout/act-wire';
import { EncodedImageCache } from '../../rollout/encoded-image-cache';
import { makePng } from './helpers';

const SCREEN = { width: 160, height: 160 };

describe('EncodedImageCache', () => {
  it('returns the same tensor as a fresh encoding, for equal bytes in a different array', () => {
    const cache = new EncodedImageCache(4);
    const first = cache.encode(makePng(1), SCREEN, 64);
    const again = cache.encode(new Uint8Array(makePng(1)), SCREEN, 64);
    assert.deepEqual(cache.stats, { entries: 1, hits: 1, misses: 1 });
    assert.deepEqual(Array.from(again.data), Array.from(encodeScreenshotImage(makePng(1), SCREEN, 64).data));
    assert.equal(again.data, first.data);
    assert.deepEqual([again.width, again.height, again.size], [160, 160, 64]);
  });

  it('keys by input size and by content', () => {
    const cache = new EncodedImageCache(4);
    const at64 = cache.encode(makePng(1), SCREEN, 64);
    const at32 = cache.encode(makePng(1), SCREEN, 32);
    const other = cache.encode(makePng(2), SCREEN, 64);
    assert.deepEqual(cache.stats, { entries: 3, hits: 0, misses: 3 });
    assert.equal(at64.data.length, 3 * 64 * 64);
    assert.equal(at32.data.length, 3 * 32 * 32);
    assert.notDeepEqual(Array.from(other.data), Array.from(at64.data));
  });

  it('drops the least recently used entry when full', () => {
    const cache = new EncodedImageCache(2);
    cache.encode(makePng(1), SCREEN, 32);
    cache.encode(makePng(2), SCREEN, 32);
    cache.encode(makePng(1), SCREEN, 32); // 1 is now the most recently used
    cache.encode(makePng(3), SCREEN, 32); // evicts 2
    assert.deepEqual(cache.stats, { entries: 2, hits: 1, misses: 3 });
    cache.encode(makePng(1), SCREEN, 32);
    assert.equal(cache.stats.hits, 2);
    cache.encode(makePng(2), SCREEN, 32);
    assert.equal(cache.stats.misses, 4);
  });

  it('refuses a size that is not a positive integer', () => {
    assert.throws(() => new EncodedImageCache(0), /maxEntries must be a positive integer, got 0/);
  });
});
