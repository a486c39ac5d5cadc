/**
 * A small real campaign for the viewer tests: real browser episodes (runEpisodeCore with the oracle and
 * random policies, screenshots and all) in a fresh bucket, ledger, discard and evaluation records written
 * with their zod schemas, and the bad objects the viewer must explain (a corrupt manifest, a trajectory
 * whose steps were deleted).
 */
import { builtinPolicies } from '../../activities/env/policies';
import { createCampaignDataActivities } from '../../activities/data/campaign-data';
import { runEpisodeCore } from '../../activities/env/run-episode';
import { BrowserEnvPool } from '../../envs/browser/pool';
import type { EvalPoint } from '../../schemas/campaign';
import { DiscardRecordSchema, type DiscardRecord } from '../../schemas/discards';
import {
  CheckpointManifestSchema,
  LedgerEntrySchema,
  StepRecordSchema,
  TrainSampleRecordSchema,
  TrajectoryManifestSchema,
  type LedgerEntry,
  type StepRecord,
  type TrainSampleRecord,
  type TrajectoryManifest,
} from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { indexTrajectory } from '../../storage/trajectory-index';
import { loadTask } from '../../tasks';

export interface StoredTrajectory {
  manifest: TrajectoryManifest;
  steps: StepRecord[];
}

export interface Dataset {
  campaignId: string;
  trajectories: Map<string, StoredTrajectory>;
  ledger: LedgerEntry[];
  /** train step → its per-sample record (the rows of the click group's steps), named by its ledger entry. */
  trainSamples: Map<number, TrainSampleRecord[]>;
  discards: DiscardRecord[];
  evals: EvalPoint[];
  /** Trajectory ids of the bad objects. */
  corruptId: string;
  goneId: string;
  /** What the write path indexed: every manifest as written (before any damage). */
  indexed: TrajectoryManifest[];
}

const EPISODES: Array<{
  groupId: string;
  i: number;
  task: string;
  seed: number;
  policy: 'oracle' | 'random';
  maxSteps?: number;
}> = [
  { groupId: 'g-click', i: 0, task: 'click-colour', seed: 3, policy: 'oracle' },
  { groupId: 'g-click', i: 1, task: 'click-colour', seed: 3, policy: 'random', maxSteps: 3 },
  { groupId: 'g-text', i: 0, task: 'enter-text', seed: 5, policy: 'oracle' },
  { groupId: 'g-scroll', i: 0, task: 'scroll-click', seed: 7, policy: 'oracle' },
];

/** version → parent: v1's model rollout was refused, so v2 was trained from v0 (the campaign's head is v2). */
export const LINEAGE: Array<[number, number | null]> = [
  [0, null],
  [1, 0],
  [2, 0],
];

export async function buildDataset(store: ObjectStore, campaignId: string): Promise<Dataset> {
  const pool = new BrowserEnvPool({ slots: 1 });
  const trajectories = new Map<string, StoredTrajectory>();
  try {
    for (const e of EPISODES) {
      const trajectoryId = `${e.groupId}-e${e.i}`;
      const res = await runEpisodeCore(
        { pool, store, policies: builtinPolicies() },
        {
          campaignId,
          groupId: e.groupId,
          trajectoryId,
          task: loadTask(e.task),
          seed: e.seed,
          policy: { kind: e.policy },
          ...(e.maxSteps ? { maxSteps: e.maxSteps } : {}),
        },
        { heartbeat: () => undefined, attempt: 1 }
      );
      const manifest = await store.getJson(res.manifestKey, TrajectoryManifestSchema);
      const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema);
      trajectories.set(trajectoryId, { manifest, steps });
    }
  } finally {
    await pool.close();
  }

  const t0 = Date.UTC(2025, 0, 1);
  const click0 = trajectories.get('g-click-e0')!.manifest;
  const click1 = trajectories.get('g-click-e1')!.manifest;
  // Per-sample records as the trainer writes them: one row per step of the consumed trajectories. Step 1
  // selects every step; step 2 leaves the first step of each trajectory out (as a low-entropy step).
  const trainSamples = new Map<number, TrainSampleRecord[]>();
  const samplesRefs = new Map<number, NonNullable<LedgerEntry['samples']>>();
  for (const step of [1, 2]) {
    const rows = [click0, click1].flatMap((m, t) =>
      trajectories.get(m.trajectoryId)!.steps.map((s) =>
        TrainSampleRecordSchema.parse({
          trajectoryId: m.trajectoryId,
          step: s.step,
          advantage: (t === 0 ? 0.75 : -0.75) / step,
          selected: step === 1 || s.step > 0,
          entropy: 1.5 + s.step / 8,
          logpOld: -1.25 - s.step / 16,
          logpBehaviour: s.behaviourLogProb,
          isWeight: 0.875 + step / 16 + s.step / 32,
          staleness: step - 1,
        })
      )
    );
    trainSamples.set(step, rows);
    const ref = await store.putJsonLines(
      keys.trainSamples(campaignId, step, 'viewer-test'),
      rows,
      TrainSampleRecordSchema
    );
    samplesRefs.set(step, { ...ref, rows: rows.length });
  }
  const ledger: LedgerEntry[] = [1, 2].map((step) =>
    LedgerEntrySchema.parse({
      schemaVersion: 1,
      campaignId,
      trainStep: step,
      fromVersion: step - 1,
      toVersion: step,
      consumed: [click0, click1].map((m) => ({
        trajectoryId: m.trajectoryId,
        manifestKey: keys.trajectoryManifest(campaignId, m.trajectoryId),
        groupId: m.groupId,
        reward: m.reward ?? 0,
        staleness: step - 1,
      })),
      isWeight: { mean: 0.97 + step / 100, min: 0.5 + step / 10, truncatedFraction: step / 20 },
      samples: samplesRefs.get(step),
      metrics: {
        loss: 0.125 * step,
        kl: 0.0031 * step,
        clipFraction: 0.05 * step,
        entropyMean: 2.5 - step / 10,
        selectedFraction: 0.8,
        isWeightMean: 0.98,
      },
      startedAt: t0 + step * 60_000 - 5000,
      createdAt: t0 + step * 60_000,
    })
  );
  for (const e of ledger) await store.putJson(keys.ledgerEntry(campaignId, e.trainStep), e, LedgerEntrySchema);

  const discards: DiscardRecord[] = [
    {
      groupId: 'g-click',
      taskId: 'click-colour',
      event: 'train' as const,
      trajectoryId: 'g-click-e1',
      reason: 'down-sampled',
    },
    {
      groupId: 'g-scroll',
      taskId: 'scroll-click',
      event: 'prune' as const,
      trajectoryId: 'g-scroll-e0',
      reason: 'stale',
    },
  ].map((d, i) =>
    DiscardRecordSchema.parse({
      schemaVersion: 1,
      campaignId,
      groupId: d.groupId,
      taskId: d.taskId,
      event: d.event,
      policyVersion: 2,
      trainStep: 2,
      trajectories: [{ trajectoryId: d.trajectoryId, reason: d.reason }],
      createdAt: t0 + 130_000 + i * 240_000,
    })
  );
  // Through the data manager's own write path, which also writes the discard index.
  for (const d of discards)
    await createCampaignDataActivities({ store, now: () => d.createdAt }).recordDiscards({
      campaignId,
      policyVersion: d.policyVersion,
      trainStep: d.trainStep,
      entries: [{ groupId: d.groupId, taskId: d.taskId, event: d.event, trajectories: d.trajectories }],
    });

  // The experience pool: the oracle's click-colour success (the data manager's addToPool, as a group does).
  await createCampaignDataActivities({ store, now: () => t0 + 90_000 }).addToPool({
    campaignId,
    trajectories: [
      {
        trajectoryId: click0.trajectoryId,
        manifestKey: keys.trajectoryManifest(campaignId, click0.trajectoryId),
        taskId: click0.taskId,
        groupId: click0.groupId,
        reward: click0.reward,
        status: click0.status,
        numSteps: click0.numSteps,
        minPolicyVersion: click0.minPolicyVersion,
        maxPolicyVersion: click0.maxPolicyVersion,
        injectedFromPool: false,
      },
    ],
    keepNewest: 2,
  });

  // A lineage with a rollback (LINEAGE).
  for (const [version, parent] of LINEAGE) {
    const weights = await store.putBytes(
      `campaigns/${campaignId}/test-weights/v${version}.bin`,
      Buffer.from([version])
    );
    await store.putJson(
      keys.checkpointManifest(campaignId, version),
      CheckpointManifestSchema.parse({
        schemaVersion: 1,
        campaignId,
        version,
        parentVersion: parent,
        specHash: 'viewer-test',
        weights,
        ...(version > 0 ? { ledgerKey: keys.ledgerEntry(campaignId, version) } : {}),
        metrics: version > 0 ? { loss: 0.1 * version } : {},
        createdAt: t0 + version * 60_000,
      }),
      CheckpointManifestSchema
    );
  }

  const evals: EvalPoint[] = [0, 1, 2].map((v) => ({
    version: v,
    successRate: 0.3 + 0.3 * v,
    episodes: 20,
    atEpisodes: 40 * v,
    atMs: 60_000 * v,
    perFamily: { 'click-colour': 0.4 + 0.3 * v, 'enter-text': 0.2 + 0.3 * v },
  }));
  for (const p of evals)
    await store.putJson(`${keys.evalPrefix(campaignId)}v${String(p.version).padStart(6, '0')}-${p.atMs}.json`, p);

  // A manifest that parses as JSON but breaks its schema at "reward", and one whose steps object is gone.
  // Both were stored and indexed by the write path first, then damaged.
  const corruptId = 'broken-e0';
  await indexTrajectory(store, { ...click0, trajectoryId: corruptId, groupId: 'broken' });
  await store.putBytes(
    keys.trajectoryManifest(campaignId, corruptId),
    Buffer.from(JSON.stringify({ ...click0, trajectoryId: corruptId, groupId: 'broken', reward: 'high' })),
    'application/json'
  );
  const goneId = 'gone-e0';
  const gone = { ...click0, trajectoryId: goneId, groupId: 'gone', stepsKey: keys.trajectorySteps(campaignId, goneId) };
  await store.putJson(keys.trajectoryManifest(campaignId, goneId), gone, TrajectoryManifestSchema);
  await indexTrajectory(store, gone);
  const indexed = [
    ...[...trajectories.values()].map((t) => t.manifest),
    { ...click0, trajectoryId: corruptId, groupId: 'broken' },
    gone,
  ];
  return { campaignId, trajectories, ledger, trainSamples, discards, evals, corruptId, goneId, indexed };
}
