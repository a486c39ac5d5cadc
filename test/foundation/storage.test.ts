/** The storage layer against the real MinIO started by infra/. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { z } from 'zod';
import { CorruptObjectError, ObjectNotFoundError, StorageUnavailableError } from '../../storage/errors';
import { keys, safeSegment } from '../../storage/keys';
import { ObjectStore, sha256Hex } from '../../storage/object-store';
import { encodeSafetensors, f32Tensor } from '../../storage/safetensors';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';

let store: ObjectStore;
let cleanup: () => Promise<void>;

before(async () => {
  ({ store, cleanup } = await freshBucket('storage'));
});
after(async () => {
  await cleanup();
});

// A minimal valid 1×1 PNG.
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6360f8cfc0f01f0005000201d0a37f2a0000000049454e44ae426082',
  'hex'
);

test('a missing bucket is created, idempotently', async () => {
  const other = store.withBucket(`t-new-${uniqueSuffix()}`);
  assert.equal(await other.client.bucketExists(other.bucket), false);
  await other.ensureBucket();
  await other.ensureBucket();
  assert.equal(await other.client.bucketExists(other.bucket), true);
  await other.client.removeBucket(other.bucket);
});

test('JSON and bytes round-trip; list by prefix; missing objects are typed errors', async () => {
  const Schema = z.object({ a: z.number(), b: z.string() });
  const ref = await store.putJson('rt/one.json', { a: 1, b: 'x' }, Schema);
  assert.equal(ref.sha256, sha256Hex(JSON.stringify({ a: 1, b: 'x' })));
  assert.deepEqual(await store.getJson('rt/one.json', Schema), { a: 1, b: 'x' });
  await store.putBytes('rt/two.bin', new Uint8Array([1, 2, 3]));
  assert.deepEqual([...(await store.getBytes('rt/two.bin'))], [1, 2, 3]);
  await store.putBytes('other/three.bin', new Uint8Array([4]));
  assert.deepEqual(await store.list('rt/'), ['rt/one.json', 'rt/two.bin']);
  await assert.rejects(
    store.getBytes('rt/nope.bin'),
    (err: unknown) => err instanceof ObjectNotFoundError && /rt\/nope\.bin/.test(err.message)
  );
  // Writing a record that violates its schema is refused before anything is written.
  assert.throws(() => Schema.parse({ a: 'no' }));
  await assert.rejects(store.putJson('rt/bad.json', { a: 'no' } as never, Schema as never));
  assert.equal(await store.exists('rt/bad.json'), false);
});

test('JSON lines round-trip and a schema mismatch names key and line', async () => {
  const Row = z.object({ step: z.number() });
  await store.putJsonLines('jl/steps.jsonl', [{ step: 0 }, { step: 1 }], Row);
  assert.deepEqual(await store.getJsonLines('jl/steps.jsonl', Row), [{ step: 0 }, { step: 1 }]);
  await store.putBytes('jl/bad.jsonl', Buffer.from('{"step":0}\n{"step":"x"}'));
  await assert.rejects(
    store.getJsonLines('jl/bad.jsonl', Row),
    /corrupt object jl\/bad\.jsonl: line 2 does not match its schema at "step"/
  );
  await store.putBytes('jl/broken.json', Buffer.from('{"step":'));
  await assert.rejects(store.getJson('jl/broken.json', Row), /corrupt object jl\/broken\.json: not valid JSON/);
});

test('screenshots are content-addressed and written once', async () => {
  const a = await store.putScreenshot(PNG);
  assert.equal(a.key, keys.screenshot(createHash('sha256').update(PNG).digest('hex')));
  const stat1 = await store.client.statObject(store.bucket, a.key);
  const b = await store.putScreenshot(PNG);
  const stat2 = await store.client.statObject(store.bucket, b.key);
  assert.equal(b.key, a.key);
  assert.equal(stat2.etag, stat1.etag);
  assert.equal(stat2.lastModified.getTime(), stat1.lastModified.getTime());
  await assert.rejects(store.putScreenshot(Buffer.from('not a png')), /not a PNG/);
});

test('an object altered behind our back is detected by its recorded sha256', async () => {
  const ref = await store.putBytes('tamper/x.bin', Buffer.from('original'));
  // Overwrite the bytes but keep the old hash in the metadata: what a partial/foreign write looks like.
  await store.client.putObject(store.bucket, 'tamper/x.bin', Buffer.from('altered!'), 8, {
    'x-amz-meta-sha256': ref.sha256,
  });
  await assert.rejects(
    store.getBytes('tamper/x.bin'),
    (err: unknown) => err instanceof CorruptObjectError && err.key === 'tamper/x.bin'
  );
  await assert.rejects(store.verify(ref), /corrupt object tamper\/x\.bin: sha256/);
});

test('safetensors: valid ones load with dtype/shape checked; corrupt ones are rejected with their key', async () => {
  const tensors = { w: f32Tensor([2, 2], new Float32Array([1, 2, 3, 4])) };
  const ref = await store.putSafetensors('ckpt/v1/weights.safetensors', tensors);
  const ok = await store.getSafetensors(ref.key, {
    expected: { w: { dtype: 'F32', shape: [2, 2] } },
    sha256: ref.sha256,
  });
  assert.equal(ok.sha256, ref.sha256);
  await assert.rejects(
    store.getSafetensors(ref.key, { expected: { w: { dtype: 'F32', shape: [4] } } }),
    (err: unknown) =>
      err instanceof CorruptObjectError && err.key === ref.key && /shape \[2,2\], expected \[4\]/.test(err.message)
  );
  const full = encodeSafetensors(tensors);
  await store.putBytes('ckpt/v2/weights.safetensors', full.subarray(0, full.length - 5)); // truncated upload
  await assert.rejects(
    store.getSafetensors('ckpt/v2/weights.safetensors'),
    (err: unknown) =>
      err instanceof CorruptObjectError && err.key === 'ckpt/v2/weights.safetensors' && /truncated/.test(err.message)
  );
  await store.putBytes('ckpt/v3/weights.safetensors', Buffer.from('garbage-not-safetensors'));
  await assert.rejects(
    store.getSafetensors('ckpt/v3/weights.safetensors'),
    /corrupt object ckpt\/v3\/weights\.safetensors/
  );
});

test('a 150 MB object streams in (multipart) and back out intact', async () => {
  const total = 150 * 1024 * 1024;
  const chunk = 1024 * 1024;
  function* chunks() {
    // Deterministic, non-repeating content so a misplaced part would change the hash.
    for (let i = 0; i < total / chunk; i++) {
      const b = Buffer.alloc(chunk, i % 251);
      b.writeUInt32LE(i, 0);
      yield b;
    }
  }
  const expected = createHash('sha256');
  for (const c of chunks()) expected.update(c);
  const ref = await store.putStream('big/150mb.bin', Readable.from(chunks()), total);
  assert.equal(ref.bytes, total);
  assert.equal(ref.sha256, expected.digest('hex'));
  const stat = await store.client.statObject(store.bucket, ref.key);
  assert.equal(stat.size, total);
  assert.match(stat.etag, /-\d+$/, 'uploaded as multipart (etag has a part count)');
  await store.verify(ref);
  await store.remove(ref.key);
});

test('ids from task files cannot escape their prefix', () => {
  assert.equal(safeSegment('../../etc/passwd'), '.._.._etc_passwd');
  assert.ok(!keys.trajectoryManifest('c1', '../../x').includes('/../'));
  assert.throws(() => safeSegment('..'), /not a valid key segment/);
  assert.throws(() => safeSegment(''), /non-empty/);
});

test('an unreachable endpoint is a clear StorageUnavailableError', async () => {
  const settings = testSettings();
  const dead = ObjectStore.fromSettings({ ...settings, s3: { ...settings.s3, endpoint: 'http://127.0.0.1:1' } });
  await assert.rejects(
    dead.ensureBucket(),
    (err: unknown) => err instanceof StorageUnavailableError && /127\.0\.0\.1:1 is unreachable/.test(err.message)
  );
});
