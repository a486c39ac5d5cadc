/**
 * The campaign's discard-record writer (workflows/logic/coalescing-writer.ts): one write in flight, what
 * comes meanwhile goes out together, and a flush waits for exactly what was queued.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CoalescingWriter } from '../../workflows/logic/coalescing-writer';

/** A write the test completes by hand, recording what each call got. */
function manualWrites() {
  const calls: number[][] = [];
  const release: Array<() => void> = [];
  const write = (items: number[]) => {
    calls.push(items);
    return new Promise<void>((resolve) => release.push(resolve));
  };
  return { calls, release, write };
}

const settle = () => new Promise((r) => setImmediate(r));

test('items queued while a write is in flight go out together in the next write, never two writes at once', async () => {
  const m = manualWrites();
  const w = new CoalescingWriter<number>(m.write, 100);
  w.add([1, 2]);
  const first = w.flush();
  await settle();
  assert.deepEqual(m.calls, [[1, 2]]);
  // Ten more flushes while the first write runs: each adds items, none starts a second write.
  for (let i = 3; i <= 12; i++) {
    w.add([i]);
    void w.flush();
  }
  await settle();
  assert.equal(m.calls.length, 1, 'a second write started while one was in flight');
  assert.equal(w.queued, 10);
  m.release.shift()!();
  await settle();
  assert.deepEqual(m.calls[1], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  m.release.shift()!();
  await first;
  assert.equal(w.queued, 0);
  assert.equal(w.writing, false);
});

test('flush resolves only when everything queued before and during it is written', async () => {
  const m = manualWrites();
  const w = new CoalescingWriter<number>(m.write, 100);
  w.add([1]);
  let done = false;
  const flushed = w.flush().then(() => {
    done = true;
  });
  await settle();
  w.add([2]); // arrives during the first write
  m.release.shift()!();
  await settle();
  assert.equal(done, false, 'flush resolved with an item still queued');
  assert.deepEqual(m.calls, [[1], [2]]);
  m.release.shift()!();
  await flushed;
  assert.equal(done, true);
});

test('batches are capped at maxBatch', async () => {
  const sizes: number[] = [];
  const w = new CoalescingWriter<number>(async (items) => {
    sizes.push(items.length);
  }, 4);
  w.add(Array.from({ length: 10 }, (_, i) => i));
  await w.flush();
  assert.deepEqual(sizes, [4, 4, 2]);
});

test('an idle flush with nothing queued writes nothing', async () => {
  let writes = 0;
  const w = new CoalescingWriter<number>(async () => {
    writes++;
  }, 8);
  await w.flush();
  assert.equal(writes, 0);
});

test('a failing write rejects the flush; the writer is usable again afterwards', async () => {
  let fail = true;
  const written: number[][] = [];
  const w = new CoalescingWriter<number>(async (items) => {
    if (fail) throw new Error('storage down');
    written.push(items);
  }, 8);
  w.add([1]);
  await assert.rejects(w.flush(), /storage down/);
  assert.equal(w.writing, false);
  fail = false;
  w.add([2]);
  await w.flush();
  assert.deepEqual(written, [[2]]);
});

test('maxBatch must be a positive integer', () => {
  assert.throws(() => new CoalescingWriter<number>(async () => undefined, 0), /maxBatch must be a positive integer/);
});
