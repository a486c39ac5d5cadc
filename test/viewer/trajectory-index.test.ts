/**
 * The append-only trajectory index against real MinIO: appends compact into segments (a partition keeps
 * fewer than FANOUT objects per level), a retried episode's later entry replaces the earlier one, two
 * writers compacting the same deltas at once write one segment, full levels merge upward, and appends
 * that allow a linger share a delta.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TrajectoryManifest } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import {
  compactionsSettled,
  compactPartition,
  FANOUT,
  FOREIGN_DELTA_MIN_AGE_MS,
  indexKeys,
  indexTrajectory,
  partitions,
  readPartition,
  writeSegments,
  type TrajectoryIndexEntry,
} from '../../storage/trajectory-index';
import { freshBucket } from '../helpers/infra';

let store: ObjectStore;
let cleanup: () => Promise<void>;
before(async () => {
  ({ store, cleanup } = await freshBucket('tindex'));
});
after(async () => {
  await cleanup?.();
});

const T0 = Date.UTC(2025, 5, 1, 10);

function manifest(campaignId: string, i: number, over: Partial<TrajectoryManifest> = {}): TrajectoryManifest {
  return {
    schemaVersion: 1,
    trajectoryId: `g${Math.floor(i / 4)}-e${i % 4}`,
    campaignId,
    taskId: 'click-target',
    groupId: `g${Math.floor(i / 4)}`,
    seed: 1,
    instruction: 'click',
    fields: [],
    reward: i % 3 === 0 ? 1 : 0,
    status: 'ok',
    numSteps: 3,
    maxSteps: 8,
    minPolicyVersion: 2,
    maxPolicyVersion: 3,
    stepsKey: 'x/steps.jsonl',
    stepsSha256: '0'.repeat(64),
    source: 'rollout',
    envKind: 'browser',
    createdAt: T0 + i * 1000,
    ...over,
  };
}

const objectsIn = (campaignId: string, partition: string) =>
  store.list(indexKeys.partition(campaignId, 'trajectories', partition));

test('appends compact into segments and every entry stays readable once', async () => {
  const n = 2 * FANOUT + 5;
  for (let i = 0; i < n; i++) await indexTrajectory(store, manifest('c1', i), T0 + i);
  // A retried episode: the same trajectory again, later, now failed: the later entry wins.
  await indexTrajectory(store, manifest('c1', 0, { status: 'env_error', reward: null }), T0 + 10_000);
  await compactionsSettled();
  for (const p of [partitions.task('click-target'), partitions.version(2), partitions.version(3)]) {
    const keys = await objectsIn('c1', p);
    const names = keys.map((k) => k.split('/').at(-1)!);
    assert.equal(names.filter((k) => k.startsWith('s1-')).length, 2, `${p}: two level-1 segments`);
    assert.equal(names.filter((k) => k.startsWith('d-')).length, 6, `${p}: the deltas not yet compacted`);
    const r = await readPartition(store, 'c1', 'trajectories', p);
    assert.equal(r.entries.length, n, p);
    assert.equal(r.objects, 8);
    const first = r.entries.find((e) => e.trajectoryId === 'g0-e0')!;
    assert.deepEqual([first.status, first.reward], ['env_error', null]);
  }
  const hour = await readPartition(store, 'c1', 'trajectories', partitions.hour(T0));
  assert.equal(hour.entries.length, n);
});

test('two writers compacting the same deltas write one segment; full levels merge upward', async () => {
  for (let i = 0; i < FANOUT; i++) {
    const m = manifest('c2', i);
    // Deltas only (no compaction yet), named the way an append names them.
    const key = `${indexKeys.partition('c2', 'trajectories', partitions.task(m.taskId))}d-${String(T0 + i).padStart(13, '0')}-${i}.jsonl`;
    await store.putBytes(key, Buffer.from(JSON.stringify({ ...entryOf(m), indexedAt: T0 + i })));
  }
  await Promise.all(
    [1, 2, 3].map(() => compactPartition(store, 'c2', 'trajectories', partitions.task('click-target')))
  );
  const names = (await objectsIn('c2', partitions.task('click-target'))).map((k) => k.split('/').at(-1)!);
  assert.equal(names.length, 1, names.join(', '));
  assert.match(names[0]!, /^s1-/);

  // FANOUT level-1 segments of 3 entries each merge into one level-2 segment.
  const entries = Array.from({ length: FANOUT * 3 }, (_, i) => ({ ...entryOf(manifest('c3', i)), indexedAt: T0 + i }));
  await writeSegments(store, 'c3', 'trajectories', new Map([[partitions.task('click-target'), entries]]), 3);
  await compactPartition(store, 'c3', 'trajectories', partitions.task('click-target'));
  const merged = (await objectsIn('c3', partitions.task('click-target'))).map((k) => k.split('/').at(-1)!);
  assert.deepEqual(
    merged.map((k) => k.slice(0, 3)),
    ['s2-']
  );
  assert.equal(
    (await readPartition(store, 'c3', 'trajectories', partitions.task('click-target'))).entries.length,
    FANOUT * 3
  );
});

function entryOf(m: TrajectoryManifest): Omit<TrajectoryIndexEntry, 'indexedAt'> {
  return {
    trajectoryId: m.trajectoryId,
    groupId: m.groupId,
    taskId: m.taskId,
    reward: m.reward,
    status: m.status,
    source: m.source,
    minVersion: m.minPolicyVersion,
    maxVersion: m.maxPolicyVersion,
    steps: m.numSteps,
    maxSteps: m.maxSteps,
    createdAt: m.createdAt,
  };
}

test('appends that arrive together share a delta, and each resolves only once its entry is stored', async () => {
  const n = 48;
  const settled: boolean[] = [];
  // A burst, as when many episodes of one env worker finish at once.
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      await indexTrajectory(store, manifest('c4', i), T0 + i);
      const read = await readPartition(store, 'c4', 'trajectories', partitions.task('click-target'));
      settled.push(read.entries.some((e) => e.trajectoryId === manifest('c4', i).trajectoryId));
    })
  );
  await compactionsSettled();
  assert.equal(settled.length, n);
  assert.ok(
    settled.every((s) => s),
    'an append resolved before its entry could be read'
  );
  const deltas = (await objectsIn('c4', partitions.task('click-target'))).filter((k) => /\/d-/.test(k));
  // One append per delta would be 48; a burst is written in a few round trips.
  assert.ok(deltas.length <= 4, `${deltas.length} deltas for one burst of ${n} appends`);
  const r = await readPartition(store, 'c4', 'trajectories', partitions.version(3));
  assert.equal(r.entries.length, n);
});

test("a process's first append to a partition merges the deltas an earlier writer left", async () => {
  // What a killed writer leaves: a full batch of deltas it never compacted.
  for (let i = 0; i < FANOUT; i++) {
    const m = manifest('c5', i, { taskId: 'click-colour' });
    const key = `${indexKeys.partition('c5', 'trajectories', partitions.task('click-colour'))}d-${String(T0 + i).padStart(13, '0')}-${i}.jsonl`;
    await store.putBytes(key, Buffer.from(JSON.stringify({ ...entryOf(m), indexedAt: T0 + i })));
  }
  await indexTrajectory(store, manifest('c5', FANOUT, { taskId: 'click-colour' }), T0 + FANOUT);
  await compactionsSettled();
  const names = (await objectsIn('c5', partitions.task('click-colour'))).map((k) => k.split('/').at(-1)!);
  assert.equal(names.filter((k) => k.startsWith('s1-')).length, 1, names.join(', '));
  assert.equal(names.filter((k) => k.startsWith('d-')).length, 1, names.join(', '));
  const r = await readPartition(store, 'c5', 'trajectories', partitions.task('click-colour'));
  assert.equal(r.entries.length, FANOUT + 1);
});

test("compacting a process's own deltas reads none of them back and deletes them in one request", async () => {
  // Counted on the store this process writes with: a pass over FANOUT of its own deltas is one LIST, one
  // segment PUT and one multi-object DELETE per partition (it was FANOUT GETs and FANOUT DELETEs).
  const calls = { gets: 0, removes: 0, removeMany: 0 };
  const counting = Object.create(store) as ObjectStore;
  counting.getJsonLines = ((...a: Parameters<ObjectStore['getJsonLines']>) => {
    calls.gets++;
    return store.getJsonLines(...a);
  }) as ObjectStore['getJsonLines'];
  counting.remove = (key: string) => {
    calls.removes++;
    return store.remove(key);
  };
  counting.removeMany = (keys: string[]) => {
    calls.removeMany++;
    return store.removeMany(keys);
  };
  // A pass runs at a process's first append to a partition and after every FANOUT more.
  for (let i = 0; i <= FANOUT; i++)
    await indexTrajectory(counting, manifest('c6', i, { minPolicyVersion: 4, maxPolicyVersion: 4 }), T0 + i);
  await compactionsSettled();
  // Partitions: task, hour, version 4; in each the second pass merges the first FANOUT deltas.
  assert.deepEqual(calls, { gets: 0, removes: 0, removeMany: 3 });
  for (const p of [partitions.task('click-target'), partitions.hour(T0), partitions.version(4)]) {
    const names = (await objectsIn('c6', p)).map((k) => k.split('/').at(-1)!);
    assert.deepEqual(
      names.map((n) => n.slice(0, 2)),
      ['d-', 's1'],
      `${p}: ${names.join(', ')}`
    );
    const r = await readPartition(store, 'c6', 'trajectories', p);
    assert.equal(r.entries.length, FANOUT + 1, p);
  }
});

test("another live writer's young deltas are left to it (not read back); abandoned old ones are merged", async () => {
  const partition = partitions.task('click-target');
  const prefix = indexKeys.partition('c9', 'trajectories', partition);
  const young = Date.now() - 1000;
  for (let i = 0; i < FANOUT; i++) {
    const m = manifest('c9', i);
    await store.putBytes(
      `${prefix}d-${String(young + i).padStart(13, '0')}-${i}.jsonl`,
      Buffer.from(JSON.stringify({ ...entryOf(m), indexedAt: young + i }))
    );
  }
  let gets = 0;
  const other = Object.create(store) as ObjectStore;
  other.getJsonLines = ((...a: Parameters<ObjectStore['getJsonLines']>) => {
    gets++;
    return store.getJsonLines(...a);
  }) as ObjectStore['getJsonLines'];
  await compactPartition(other, 'c9', 'trajectories', partition);
  assert.equal(gets, 0, "a pass read another writer's deltas");
  assert.equal((await objectsIn('c9', partition)).length, FANOUT, 'they stay for their writer to merge');
  assert.ok(FOREIGN_DELTA_MIN_AGE_MS >= 60_000);
  // The same deltas named 10 minutes older (a writer that stopped) are merged; see also the c5 test.
});

test('appends that allow a linger share one delta; an append without linger writes the lingering batch at once', async () => {
  // Five episodes finishing 20 ms apart, each allowing 10 s: one delta per partition, written once the
  // fifth append (no linger) arrives, not after 10 s.
  const partition = partitions.task('click-target');
  const started = Date.now();
  const writes: Array<Promise<void>> = [];
  for (let i = 0; i < 4; i++) {
    writes.push(indexTrajectory(store, manifest('c7', i), T0 + i, { lingerMs: 10_000 }));
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.deepEqual(await objectsIn('c7', partition), [], 'nothing written while the batch may linger');
  writes.push(indexTrajectory(store, manifest('c7', 4), T0 + 4));
  await Promise.all(writes);
  assert.ok(Date.now() - started < 9_000, 'the append without linger did not wait for the others');
  await compactionsSettled();
  const deltas = (await objectsIn('c7', partition)).filter((k) => k.split('/').at(-1)!.startsWith('d-'));
  assert.equal(deltas.length, 1, deltas.join(', '));
  assert.equal((await readPartition(store, 'c7', 'trajectories', partition)).entries.length, 5);

  // A linger is an upper bound on the wait: a lone append with 300 ms is stored after it.
  await indexTrajectory(store, manifest('c8', 0), T0, { lingerMs: 300 });
  assert.equal((await readPartition(store, 'c8', 'trajectories', partition)).entries.length, 1);
});

test('removeMany removes every key in one call, missing keys included', async () => {
  const keys = Array.from({ length: 5 }, (_, i) => `remove-many/k${i}`);
  for (const k of keys) await store.putBytes(k, Buffer.from('x'));
  await store.removeMany([...keys, 'remove-many/never-written']);
  assert.deepEqual(await store.list('remove-many/'), []);
});
