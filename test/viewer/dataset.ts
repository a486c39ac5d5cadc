/**
 * A small real campaign for the viewer tests: real browser episodes (runEpisodeCore with the oracle and
 * random policies, screenshots and all) in a fresh bucket, ledger, discard and evaluation records written
 * with their zod schemas, and the bad objects the viewer must explain (a corrupt manifest, a trajectory
 * whose steps were deleted).
 */
import { builtinPolicies } from '../../activities/env/policies';
import { runEpisodeCore } from '../../activities/env/run-episode';
import { BrowserEnvPool } from '../../envs/browser/pool';
import type { EvalPoint } from '../../schemas/campaign';
import { DiscardRecordSchema, type DiscardRecord } from '../../schemas/discards';
import {
  LedgerEntrySchema,
  StepRecordSchema,
  TrajectoryManifestSchema,
  type LedgerEntry,
  type StepRecord,
  type TrajectoryManifest,
} from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks';

export interface StoredTrajectory {
  manifest: TrajectoryManifest;
  steps: StepRecord[];
}

export interface Dataset {
  campaignId: string;
  trajectories: Map<string, StoredTrajectory>;
  ledger: LedgerEntry[];
  discards: DiscardRecord[];
  evals: EvalPoint[];
  /** Trajectory ids of the bad objects. */
  corruptId: string;
  goneId: string;
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
      createdAt: t0 + 130_000 + i,
    })
  );
  for (const d of discards)
    await store.putJson(keys.discardRecord(campaignId, d.groupId, d.event), d, DiscardRecordSchema);

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
  const corruptId = 'broken-e0';
  await store.putBytes(
    keys.trajectoryManifest(campaignId, corruptId),
    Buffer.from(JSON.stringify({ ...click0, trajectoryId: corruptId, reward: 'high' })),
    'application/json'
  );
  const goneId = 'gone-e0';
  await store.putJson(
    keys.trajectoryManifest(campaignId, goneId),
    { ...click0, trajectoryId: goneId, groupId: 'gone', stepsKey: keys.trajectorySteps(campaignId, goneId) },
    TrajectoryManifestSchema
  );
  return { campaignId, trajectories, ledger, discards, evals, corruptId, goneId };
}
