/**
 * DynamicBatcher logic with a fake backend (the only fake in the rollout tests; everything else runs a
 * real onnxruntime session). Assertions are on batch sizes and outputs, never on timing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatcherClosedError, BatcherOverloadedError, DynamicBatcher, type BatchBackend } from '../../rollout/batcher';

/** A backend that records batch sizes and can hold a batch until released. */
function recorder(): BatchBackend<number, number> & { sizes: number[]; hold?: Promise<void> } {
  const r = {
    sizes: [] as number[],
    hold: undefined as Promise<void> | undefined,
    async run(batch: number[]) {
      r.sizes.push(batch.length);
      if (r.hold) await r.hold;
      return batch.map((x) => x * 10);
    },
  };
  return r;
}

describe('DynamicBatcher', () => {
  it('groups requests submitted together into batches of at most maxBatch, each caller getting its own output', async () => {
    const be = recorder();
    const b = new DynamicBatcher(be, { maxBatch: 4, maxWaitMs: 20 });
    const out = await Promise.all(Array.from({ length: 10 }, (_, i) => b.submit(i)));
    assert.deepEqual(
      out,
      Array.from({ length: 10 }, (_, i) => i * 10)
    );
    // Two full batches at once; the last two wait (up to maxWaitMs) for company that never comes.
    assert.deepEqual(be.sizes, [4, 4, 2]);
    assert.equal(b.batches, 3);
    assert.deepEqual([...b.sizes.entries()].sort(), [
      [2, 1],
      [4, 2],
    ]);
  });

  it('runs a partial batch after maxWaitMs', async () => {
    const be = recorder();
    const b = new DynamicBatcher(be, { maxBatch: 64, maxWaitMs: 5 });
    const out = await Promise.all([b.submit(1), b.submit(2), b.submit(3)]);
    assert.deepEqual(out, [10, 20, 30]);
    assert.deepEqual(be.sizes, [3]);
  });

  it('with maxBatch 1 every request is its own batch', async () => {
    const be = recorder();
    const b = new DynamicBatcher(be, { maxBatch: 1, maxWaitMs: 0 });
    await Promise.all([1, 2, 3, 4, 5].map((x) => b.submit(x)));
    assert.deepEqual(be.sizes, [1, 1, 1, 1, 1]);
  });

  it('requests arriving while a batch runs are grouped into the next batch', async () => {
    const be = recorder();
    let release!: () => void;
    be.hold = new Promise<void>((r) => (release = r));
    const b = new DynamicBatcher(be, { maxBatch: 8, maxWaitMs: 0 });
    const first = b.submit(0);
    // Wait until the first batch is running (held), then pile up requests behind it.
    while (b.inFlight === 0) await new Promise((r) => setImmediate(r));
    const rest = Array.from({ length: 6 }, (_, i) => b.submit(i + 1));
    assert.equal(b.queueDepth, 6);
    be.hold = undefined;
    release();
    await Promise.all([first, ...rest]);
    assert.deepEqual(be.sizes, [1, 6]);
  });

  it('a failing batch rejects its own requests only', async () => {
    let calls = 0;
    const b = new DynamicBatcher<number, number>(
      {
        run(batch) {
          calls += 1;
          if (calls === 1) throw new Error('boom');
          return batch.map((x) => x + 1);
        },
      },
      { maxBatch: 2, maxWaitMs: 0 }
    );
    const results = await Promise.allSettled([b.submit(1), b.submit(2), b.submit(3), b.submit(4)]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'rejected', 'fulfilled', 'fulfilled']
    );
    assert.match(String((results[0] as PromiseRejectedResult).reason), /boom/);
  });

  it('rejects a backend that returns the wrong number of outputs', async () => {
    const b = new DynamicBatcher<number, number>({ run: () => [1] }, { maxBatch: 2, maxWaitMs: 0 });
    const r = await Promise.allSettled([b.submit(1), b.submit(2)]);
    assert.ok(r.every((x) => x.status === 'rejected'));
    assert.match(String((r[0] as PromiseRejectedResult).reason), /1 outputs for 2 inputs/);
  });

  it('applies back-pressure beyond maxQueue and refuses work after close', async () => {
    const be = recorder();
    let release!: () => void;
    be.hold = new Promise<void>((r) => (release = r));
    const b = new DynamicBatcher(be, { maxBatch: 1, maxWaitMs: 0, maxQueue: 2 });
    const running = b.submit(1);
    while (b.inFlight === 0) await new Promise((r) => setImmediate(r));
    const q1 = b.submit(2);
    const q2 = b.submit(3);
    await assert.rejects(b.submit(4), BatcherOverloadedError);
    b.close();
    await assert.rejects(q1, BatcherClosedError);
    await assert.rejects(q2, BatcherClosedError);
    await assert.rejects(b.submit(5), BatcherClosedError);
    release();
    assert.equal(await running, 10, 'the batch that was running completes');
  });

  it('validates its options', () => {
    assert.throws(() => new DynamicBatcher(recorder(), { maxBatch: 0, maxWaitMs: 1 }), RangeError);
    assert.throws(() => new DynamicBatcher(recorder(), { maxBatch: 1, maxWaitMs: -1 }), RangeError);
  });
});
