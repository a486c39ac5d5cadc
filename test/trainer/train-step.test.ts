/** trainStep against real MinIO and real onnxruntime sessions, on synthetic one-step click episodes. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  listCheckpoints,
  loadCheckpoint,
  ensureInitialCheckpoint,
  writeCheckpoint,
} from '../../activities/trainer/checkpoints';
import { runTrainStep, specForWidth } from '../../activities/trainer/train-step';
import type { TrainStepInput } from '../../activities/trainer/types';
import { parseCampaignConfig } from '../../config/load';
import { checkpointAttempt } from '../../activities/trainer/commit';
import { LedgerEntrySchema, TrainSampleRecordSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { sha256Hex, type ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';
import { writeSyntheticGroups } from './fixtures';

let store: ObjectStore;
let cleanup: () => Promise<void>;
const spec = specForWidth(1);
const trainerCfg = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0.01 } }).trainer;

before(async () => {
  ({ store, cleanup } = await freshBucket('trainer'));
});
after(async () => {
  await cleanup();
});

function input(
  campaignId: string,
  trainStep: number,
  fromVersion: number,
  groups: TrainStepInput['groups']
): TrainStepInput {
  return {
    campaignId,
    trainStep,
    fromVersion,
    groups,
    trainer: trainerCfg,
    maxStaleness: 1,
    policy: { seed: 0, width: 1 },
  };
}

test('a train step writes a new checkpoint (parent, sha256, metrics) and a ledger entry; a retry returns the same checkpoint', async () => {
  const campaignId = 'ts-basic';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 6,
    perGroup: 8,
    policyVersion: 0,
    seed: 1,
  });
  const result = await runTrainStep({ store }, input(campaignId, 1, 0, groups));
  assert.equal(result.version, 1);
  assert.equal(result.reused, false);
  for (const m of [
    'loss',
    'kl',
    'clipFraction',
    'isWeightMean',
    'isWeightMin',
    'isWeightTruncatedFraction',
    'entropyMean',
    'selectedFraction',
    'gradNorm',
    'samplesPerSecond',
  ]) {
    assert.ok(Number.isFinite(result.metrics[m]), `metric ${m} = ${result.metrics[m]}`);
  }
  // Sampled by the same weights that trained: π_old = π_behaviour up to float error, so w ≈ 1.
  assert.ok(Math.abs(result.metrics.isWeightMean! - 1) < 1e-3);
  assert.ok(Math.abs(result.metrics.selectedFraction! - 0.8) < 0.05, 'top-80% entropy selection');

  const v1 = await loadCheckpoint(store, campaignId, 1, spec);
  assert.equal(v1.manifest.parentVersion, 0);
  assert.equal(v1.manifest.ledgerKey, keys.ledgerEntry(campaignId, 1));
  assert.ok(v1.optimizer && v1.optimizer.step >= 1);
  assert.notDeepEqual(
    Array.from(v1.weights['head.click.weight'] ?? v1.weights[Object.keys(v1.weights)[0]!]!).slice(0, 8),
    Array.from(v0.weights[Object.keys(v0.weights)[0]!]!).slice(0, 8)
  );

  const ledger = await store.getJson(keys.ledgerEntry(campaignId, 1), LedgerEntrySchema);
  assert.equal(ledger.consumed.length, 48);
  assert.equal(new Set(ledger.consumed.map((c) => c.trajectoryId)).size, 48, 'each trajectory at most once');
  assert.equal(ledger.toVersion, 1);

  // The per-sample record: named by the ledger entry with its sha256, one row per trained step sample,
  // its selected fraction the step's metric, IS weights within the cap.
  assert.ok(ledger.samples, 'the ledger entry names its per-sample record');
  assert.equal(ledger.samples.key, keys.trainSamples(campaignId, 1, checkpointAttempt(v1.manifest)!));
  const bytes = await store.getBytes(ledger.samples.key);
  assert.equal(sha256Hex(bytes), ledger.samples.sha256);
  assert.equal(bytes.length, ledger.samples.bytes);
  const rows = await store.getJsonLines(ledger.samples.key, TrainSampleRecordSchema, ledger.samples.sha256);
  assert.equal(rows.length, ledger.samples.rows);
  assert.equal(rows.length, result.metrics.samples);
  assert.equal(rows.length, 48, 'one row per step sample (one-step episodes)');
  assert.deepEqual(
    new Set(rows.map((r) => r.trajectoryId)),
    new Set(ledger.consumed.map((c) => c.trajectoryId)),
    'the rows cover exactly the consumed trajectories'
  );
  assert.equal(rows.filter((r) => r.selected).length / rows.length, result.metrics.selectedFraction);
  for (const r of rows) {
    assert.ok(r.isWeight > 0 && r.isWeight <= trainerCfg.tisCap, `IS weight ${r.isWeight} within (0, C]`);
    assert.equal(r.staleness, 0);
    assert.notEqual(r.logpBehaviour, null);
  }
  const meanIs = rows.reduce((a, r) => a + r.isWeight, 0) / rows.length;
  assert.ok(Math.abs(meanIs - result.metrics.isWeightMean!) < 1e-4, `mean IS weight ${meanIs}`);
  // Advantages of a group are centred: they sum to ~0 per group.
  const byGroup = new Map<string, number>();
  for (const r of rows) {
    const g = ledger.consumed.find((c) => c.trajectoryId === r.trajectoryId)!.groupId;
    byGroup.set(g, (byGroup.get(g) ?? 0) + r.advantage);
  }
  for (const [g, sum] of byGroup) assert.ok(Math.abs(sum) < 1e-3, `group ${g} advantages sum to ${sum}`);

  const again = await runTrainStep({ store }, input(campaignId, 1, 0, groups));
  assert.equal(again.version, 1);
  assert.equal(again.reused, true);
  assert.equal((await listCheckpoints(store, campaignId)).length, 2, 'no divergent second version');
  assert.deepEqual(
    (await store.getJson(keys.ledgerEntry(campaignId, 1), LedgerEntrySchema)).samples,
    ledger.samples,
    'a retry names the same record'
  );
  assert.deepEqual(await store.list(keys.trainSamplesPrefix(campaignId)), [ledger.samples.key], 'and writes no other');
});

test('a crash between checkpoint and ledger write is completed on retry, not trained twice', async () => {
  const campaignId = 'ts-orphan';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 0,
    seed: 2,
  });
  await runTrainStep({ store }, input(campaignId, 1, 0, groups));
  await store.remove(keys.ledgerEntry(campaignId, 1)); // as if the process died before the ledger write
  const retried = await runTrainStep({ store }, input(campaignId, 1, 0, groups));
  assert.equal(retried.version, 1);
  assert.equal(retried.reused, true);
  assert.ok(await store.exists(keys.ledgerEntry(campaignId, 1)));
  assert.equal((await listCheckpoints(store, campaignId)).length, 2);
  // The completed entry names the record of the attempt that trained v1 (not the retry's, which is gone).
  const completed = await store.getJson(keys.ledgerEntry(campaignId, 1), LedgerEntrySchema);
  const v1 = (await listCheckpoints(store, campaignId))[1]!;
  assert.equal(completed.samples?.key, keys.trainSamples(campaignId, 1, checkpointAttempt(v1)!));
  assert.deepEqual(await store.list(keys.trainSamplesPrefix(campaignId)), [completed.samples!.key]);
  const rows = await store.getJsonLines(completed.samples!.key, TrainSampleRecordSchema, completed.samples!.sha256);
  assert.equal(rows.filter((r) => r.selected).length / rows.length, completed.metrics.selectedFraction);
});

test('a train step reads only the manifests above its parent: its cost does not grow with the campaign, and a damaged old manifest does not stop it', async () => {
  const campaignId = 'ts-long';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const head = 30;
  for (let version = 1; version <= head; version++)
    await writeCheckpoint(store, { campaignId, version, parentVersion: version - 1, spec, weights: v0.weights });
  // An old version's manifest damaged: the campaign's old history is not this step's business.
  await store.client.putObject(store.bucket, keys.checkpointManifest(campaignId, 3), Buffer.from('{"trunc'));
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: head,
    seed: 7,
  });
  const manifestVersionsRead: number[] = [];
  const getBytes = store.getBytes.bind(store);
  store.getBytes = async (key, ...rest) => {
    const m = /\/checkpoints\/v(\d+)\/manifest\.json$/.exec(key);
    if (m) manifestVersionsRead.push(Number(m[1]));
    return getBytes(key, ...rest);
  };
  try {
    const result = await runTrainStep({ store }, input(campaignId, 1, head, groups));
    assert.equal(result.version, head + 1);
  } finally {
    store.getBytes = getBytes;
  }
  const older = manifestVersionsRead.filter((v) => v > 0 && v < head);
  assert.deepEqual(older, [], 'no manifest between v0 (the KL reference) and the parent is read');
  assert.ok(manifestVersionsRead.includes(head), 'the parent is read');
  // A retry of the committed step is answered from its ledger entry, still without the old manifests.
  assert.equal((await runTrainStep({ store }, input(campaignId, 1, head, groups))).reused, true);
});

test('NaN in the checkpoint weights is refused and nothing new is written', async () => {
  const campaignId = 'ts-nan';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 0,
    seed: 3,
  });
  const bad = Object.fromEntries(Object.entries(v0.weights).map(([k, v]) => [k, Float32Array.from(v)]));
  bad[Object.keys(bad)[0]!]![0] = Number.NaN;
  await writeCheckpoint(store, { campaignId, version: 1, parentVersion: 0, spec, weights: bad });
  await assert.rejects(runTrainStep({ store }, input(campaignId, 1, 1, groups)), /NaN or infinity/);
  assert.equal((await listCheckpoints(store, campaignId)).length, 2, 'no checkpoint written from a NaN state');
  assert.equal(await store.exists(keys.ledgerEntry(campaignId, 1)), false);
});

test('stale steps are not trained on; an all-stale batch is refused as bad input', async () => {
  const campaignId = 'ts-stale';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  await writeCheckpoint(store, { campaignId, version: 1, parentVersion: 0, spec, weights: v0.weights });
  await writeCheckpoint(store, { campaignId, version: 2, parentVersion: 1, spec, weights: v0.weights });
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 0,
    seed: 4,
  });
  // Training v2 with maxStaleness 1 admits versions ≥ 1: every step (v0) is stale.
  await assert.rejects(runTrainStep({ store }, input(campaignId, 1, 2, groups)), /no fresh, trainable step/);
});

test('with the lineage, data of an abandoned version is never trained and staleness is the lineage distance', async () => {
  const campaignId = 'ts-lineage';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  // v0 → v1 → v2 (v2 abandoned by a rollback); v3 trained from v1 is the head.
  for (const [version, parentVersion] of [
    [1, 0],
    [2, 1],
    [3, 1],
  ] as const)
    await writeCheckpoint(store, { campaignId, version, parentVersion, spec, weights: v0.weights });
  const fromAbandoned = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 2,
    seed: 5,
  });
  const lineage = { ...input(campaignId, 1, 3, fromAbandoned.groups), allowedVersions: [3, 1] };
  // Numerically v2 is within maxStaleness 1 of v3, but it is not an ancestor of v3.
  await assert.rejects(runTrainStep({ store }, lineage), /no fresh, trainable step/);
  await assert.rejects(
    runTrainStep({ store }, { ...lineage, allowedVersions: [1, 3] }),
    /allowedVersions must start with fromVersion 3/
  );
  const fromParent = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 1,
    seed: 6,
  });
  const r = await runTrainStep({ store }, { ...lineage, groups: fromParent.groups });
  const entry = await store.getJson(r.ledgerKey, LedgerEntrySchema);
  assert.ok(entry.consumed.length > 0);
  assert.ok(
    entry.consumed.every((c) => c.staleness === 1),
    'v1 is one version behind v3 along the lineage (3 − 1 = 2 by numbers)'
  );
});

test('training on sampled click episodes raises the success rate far above chance', async () => {
  const campaignId = 'ts-learn';
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  let version = 0;
  let first = 0;
  let last = 0;
  const cfg = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0, epochs: 2, minibatchSize: 64 } }).trainer;
  for (let step = 1; step <= 40; step++) {
    const current = await loadCheckpoint(store, campaignId, version, spec);
    const { groups, successRate } = await writeSyntheticGroups(store, spec, current.weights, {
      campaignId,
      groups: 16,
      perGroup: 8,
      policyVersion: version,
      seed: 100 + step,
    });
    if (step === 1) first = successRate;
    last = successRate;
    const r = await runTrainStep({ store }, { ...input(campaignId, step, version, groups), trainer: cfg });
    version = r.version;
    if (step >= 10 && last >= 0.6) break;
  }
  // Chance: a 40×40 box covers 16 of 256 cells → ≈ 6% with all 272 actions allowed.
  assert.ok(first < 0.2, `starts near chance (${first})`);
  assert.ok(last >= 0.45, `learned: success ${last.toFixed(2)} after ${version} steps (from ${first.toFixed(2)})`);
});
