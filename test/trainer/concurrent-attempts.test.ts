/**
 * Two live attempts of one train step (a worker presumed dead after a heartbeat timeout keeps running while
 * Temporal's retry trains elsewhere) against real MinIO and real onnxruntime: exactly one checkpoint and
 * one ledger entry come out, and both attempts return it. The interleavings are forced, not left to timing:
 * an attempt's store calls after its first training heartbeat wait on a gate the test opens.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ensureInitialCheckpoint, listCheckpoints, loadCheckpoint } from '../../activities/trainer/checkpoints';
import { checkpointAttempt } from '../../activities/trainer/commit';
import { runBehaviourClone, runTrainStep, specForWidth, type TrainerDeps } from '../../activities/trainer/train-step';
import type { TrainGroupRef, TrainStepInput, TrainStepResult } from '../../activities/trainer/types';
import { parseCampaignConfig } from '../../config/load';
import { CheckpointManifestSchema, LedgerEntrySchema, TrainSampleRecordSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';
import { writeSyntheticGroups } from './fixtures';

let store: ObjectStore;
let cleanup: () => Promise<void>;
const spec = specForWidth(1);
const trainerCfg = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0.01 } }).trainer;

before(async () => {
  ({ store, cleanup } = await freshBucket('trainer-race'));
});
after(async () => {
  await cleanup();
});

function stepInput(campaignId: string, groups: TrainGroupRef[]): TrainStepInput {
  return {
    campaignId,
    trainStep: 1,
    fromVersion: 0,
    groups,
    trainer: trainerCfg,
    maxStaleness: 1,
    policy: { seed: 0, width: 1 },
  };
}

async function setup(campaignId: string, seed: number): Promise<TrainGroupRef[]> {
  await ensureInitialCheckpoint(store, campaignId, spec, 0);
  const v0 = await loadCheckpoint(store, campaignId, 0, spec);
  const { groups } = await writeSyntheticGroups(store, spec, v0.weights, {
    campaignId,
    groups: 2,
    perGroup: 4,
    policyVersion: 0,
    seed,
  });
  return groups;
}

/**
 * Trainer deps for one attempt whose store calls, once the attempt has trained (its first 'training' or
 * 'bc' heartbeat), wait until `gate` resolves: everything before (idempotency checks, loading) runs
 * freely, everything after (the commit) is held.
 */
function gatedAttempt(gate: () => Promise<void>, onTrained: () => void = () => undefined): TrainerDeps {
  let trained = false;
  const gated = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (trained) await gate();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    store: gated,
    heartbeat: (details) => {
      const phase = (details as { phase?: string }).phase;
      if (!trained && (phase === 'training' || phase === 'bc')) {
        trained = true;
        onTrained();
      }
    },
  };
}

/** Both attempts hold their commit until both have trained, then commit at the same time. */
function barrierPair(): [TrainerDeps, TrainerDeps] {
  let arrived = 0;
  let open!: () => void;
  const bothTrained = new Promise<void>((resolve) => (open = resolve));
  const arrive = () => {
    if (++arrived === 2) open();
  };
  return [gatedAttempt(() => bothTrained, arrive), gatedAttempt(() => bothTrained, arrive)];
}

/** The step committed once: one ledger entry, one child of v0, every weights object owned by a manifest. */
async function assertSingleCommit(campaignId: string, results: TrainStepResult[]): Promise<void> {
  const ledgerKey = keys.ledgerEntry(campaignId, 1);
  assert.deepEqual(await store.list(keys.ledgerPrefix(campaignId)), [ledgerKey], 'exactly one ledger entry');
  const ledger = await store.getJson(ledgerKey, LedgerEntrySchema);

  const chain = await listCheckpoints(store, campaignId);
  const children = chain.filter((m) => m.parentVersion === 0);
  assert.equal(children.length, 1, `one child of v0, got versions ${children.map((m) => m.version).join(', ')}`);
  assert.deepEqual(
    chain.map((m) => m.version),
    [0, 1],
    'no second version'
  );
  const child = children[0]!;
  assert.equal(child.ledgerKey, ledgerKey);
  assert.equal(ledger.toVersion, child.version);

  const [a, b] = results as [TrainStepResult, TrainStepResult];
  assert.equal(a.version, child.version);
  assert.equal(b.version, child.version);
  assert.equal(a.manifestKey, b.manifestKey);
  assert.deepEqual(a.metrics, b.metrics, 'both attempts report the committed step');
  const shaOf = async (r: TrainStepResult) =>
    (await store.getJson(r.manifestKey, CheckpointManifestSchema)).weights.sha256;
  assert.equal(await shaOf(a), await shaOf(b));
  assert.equal(await shaOf(a), child.weights.sha256);
  assert.equal(results.filter((r) => !r.reused).length, 1, 'exactly one attempt trained the committed weights');
  await loadCheckpoint(store, campaignId, child.version, spec); // intact: sha256 and shapes verify

  // The losing attempt left nothing behind that could be mistaken for the step's output.
  const owned = new Set(chain.flatMap((m) => [m.weights.key, ...(m.optimizerState ? [m.optimizerState.key] : [])]));
  const objects = (await store.list(keys.checkpointPrefix(campaignId))).filter((k) => k.endsWith('.safetensors'));
  assert.deepEqual(
    objects.filter((k) => !owned.has(k)),
    [],
    'no orphan checkpoint objects'
  );

  // The per-sample record: only the one the ledger entry names is left, written by the attempt whose
  // checkpoint was committed, and it agrees with the committed metrics.
  const records = await store.list(keys.trainSamplesPrefix(campaignId));
  if (!ledger.samples) {
    assert.deepEqual(records, [], 'no per-sample record without a reference (behaviour cloning writes none)');
    return;
  }
  assert.deepEqual(records, [ledger.samples.key], 'the losing attempt removed its per-sample record');
  assert.equal(ledger.samples.key, keys.trainSamples(campaignId, 1, checkpointAttempt(child)!));
  const rows = await store.getJsonLines(ledger.samples.key, TrainSampleRecordSchema, ledger.samples.sha256);
  assert.equal(rows.length, ledger.samples.rows);
  assert.equal(rows.length, ledger.metrics.samples);
  assert.equal(rows.filter((r) => r.selected).length / rows.length, ledger.metrics.selectedFraction);
}

test('conditional write on the real MinIO: of concurrent writers of one key exactly one wins', async () => {
  const key = 'race/commit-record.json';
  const outcomes = await Promise.all([0, 1, 2, 3, 4].map((writer) => store.putJsonIfAbsent(key, { writer })));
  const winners = outcomes.flatMap((o, writer) => (o.written ? [writer] : []));
  assert.equal(winners.length, 1, `winners: ${winners.join(', ')}`);
  const stored = JSON.parse((await store.getBytes(key)).toString('utf8')) as { writer: number };
  assert.equal(stored.writer, winners[0]);
  assert.deepEqual(await store.putJsonIfAbsent(key, { writer: 9 }), { written: false }, 'a later writer is refused');
  assert.equal((JSON.parse((await store.getBytes(key)).toString('utf8')) as { writer: number }).writer, winners[0]);
});

test('two attempts committing at the same moment: one checkpoint, one ledger entry, both return it', async () => {
  const campaignId = 'race-barrier';
  const groups = await setup(campaignId, 11);
  const [first, second] = barrierPair();
  const results = await Promise.all([
    runTrainStep(first, stepInput(campaignId, groups)),
    runTrainStep(second, stepInput(campaignId, groups)),
  ]);
  await assertSingleCommit(campaignId, results);
});

test('a slow attempt that finishes after its retry committed returns the retry result and writes nothing', async () => {
  const campaignId = 'race-stale';
  const groups = await setup(campaignId, 12);
  // The presumed-dead attempt: it passed its idempotency check before the retry committed, and commits
  // only after the retry has committed (the gate is first awaited after both calls below have started).
  const slow = runTrainStep(
    gatedAttempt(async () => {
      await retryDone;
    }),
    stepInput(campaignId, groups)
  );
  const retryDone = runTrainStep({ store }, stepInput(campaignId, groups));
  const results = await Promise.all([slow, retryDone]);
  assert.equal(results[1].reused, false, 'the retry trained the committed checkpoint');
  await assertSingleCommit(campaignId, results);
});

test('behaviourClone: two concurrent attempts commit one warm-start version', async () => {
  const campaignId = 'race-bc';
  const demos = await setup(campaignId, 13);
  const input = {
    campaignId,
    trainStep: 1,
    fromVersion: 0,
    demos,
    epochs: 2,
    learningRate: 3e-3,
    minibatchSize: 4,
    policy: { seed: 0, width: 1 },
  };
  const [first, second] = barrierPair();
  const results = await Promise.all([runBehaviourClone(first, input), runBehaviourClone(second, input)]);
  await assertSingleCommit(campaignId, results);
});

test('loading samples heartbeats after every trajectory, before training starts', async () => {
  const campaignId = 'heartbeat-loading';
  const groups = await setup(campaignId, 14);
  const trajectories = groups.reduce((n, g) => n + g.trajectories.length, 0);
  const beats: Array<{ phase?: string; trajectoriesLoaded?: number; groups?: number }> = [];
  await runTrainStep(
    { store, heartbeat: (d) => beats.push(d as (typeof beats)[number]) },
    stepInput(campaignId, groups)
  );
  const loading = beats.filter((b) => b.phase === 'loading');
  assert.deepEqual(
    loading.map((b) => b.trajectoriesLoaded),
    Array.from({ length: trajectories }, (_, i) => i + 1),
    'one heartbeat per trajectory loaded'
  );
  assert.ok(loading.every((b) => b.groups === groups.length));
  const lastLoading = beats.lastIndexOf(loading.at(-1)!);
  const firstTraining = beats.findIndex((b) => b.phase === 'training');
  assert.ok(firstTraining > lastLoading, 'loading heartbeats come before training');
});
