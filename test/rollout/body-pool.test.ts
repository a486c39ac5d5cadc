/** The request-body pool hands out exact-length views, reuses released buffers and bounds what it keeps. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BodyPool } from '../../rollout/body-pool';

describe('BodyPool', () => {
  it('reuses a released buffer for the next body that fits, and keeps at most maxPooled', () => {
    const pool = new BodyPool(2, 1024);
    const a = pool.acquire(100);
    assert.equal(a.bytes.byteLength, 100);
    a.bytes.fill(7);
    a.release();
    a.release(); // a second release is a no-op, not a second pooled copy
    assert.equal(pool.pooled, 1);
    const b = pool.acquire(110); // fits in the 125-byte buffer made for 100 (25 % headroom)
    assert.equal(b.bytes.byteLength, 110);
    assert.equal(b.bytes.buffer, a.bytes.buffer, 'the same memory again');
    assert.equal(pool.pooled, 0);
    const c = pool.acquire(500); // nothing free that fits: a new buffer
    assert.notEqual(c.bytes.buffer, b.bytes.buffer);
    const d = pool.acquire(10);
    [b, c, d].forEach((x) => x.release());
    assert.equal(pool.pooled, 2, 'the third released buffer is dropped');
  });

  it('does not pool bodies above maxPooledBytes', () => {
    const pool = new BodyPool(4, 1024);
    const big = pool.acquire(4096);
    assert.equal(big.bytes.byteLength, 4096);
    big.release();
    assert.equal(pool.pooled, 0);
  });
});
