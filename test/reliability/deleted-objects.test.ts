/**
 * Objects deleted from MinIO under a running campaign (issue 8): while a real campaign runs (every role
 * its own process, simulated envs), the steps object of every rollout trajectory is deleted as soon as
 * its manifest appears, until the trainer has met deleted data. A train step that meets a deleted
 * trajectory leaves its group out and lists it in the ledger's `skipped` naming the key (or, when the
 * whole batch is gone, the step is refused and its groups get a `train-step-failed` discard record); no
 * step that started after a trajectory's deletion consumes it; once deletions stop, training on intact
 * groups resumes; the checkpoint chain stays unbroken and the campaign completes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readLedger, startBenchCluster, waitFor, type BenchCluster } from '../../bench/lib/bench-cluster';
import { readLineage } from '../../cli/lineage';
import { chaosCampaignConfig } from '../../infra/chaos';
import { TrajectoryManifestSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { uniqueSuffix } from '../helpers/infra';

let cluster: BenchCluster;

before(async () => {
  cluster = await startBenchCluster('deleted', {
    envWorkers: 1,
    envSlots: 4,
    envKind: 'simulated',
    simulatedProfile: 'browser',
    // Success with p = 0.5: nearly every group carries signal, so the trainer keeps consuming groups.
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
  });
});

after(async () => {
  await cluster?.close();
});

test(
  'objects deleted under a running campaign are skipped by the trainer, never trained on, and the campaign completes',
  { timeout: 600_000 },
  async () => {
    const campaignId = `deleted-${uniqueSuffix()}`;
    const campaign = await cluster.client.startCampaign(chaosCampaignConfig(campaignId));
    const { store } = cluster;
    await waitFor(
      'a first train step',
      async () => ((await campaign.status()).trainSteps >= 1 ? true : undefined),
      300_000
    );

    // Delete each new rollout trajectory's steps as soon as its manifest is there, until the trainer has
    // met deleted data (a skipped group or a refused step).
    const deletedAt = new Map<string, number>();
    const seenManifests = new Set<string>();
    const metDeleted = async (): Promise<boolean> => {
      const lineage = await readLineage(store, campaignId);
      return (
        lineage.ledger.some((e) => (e.skipped ?? []).some((x) => deletedAt.has(x.trajectoryId))) ||
        lineage.discards.some(
          (d) => d.event === 'failed-step' && d.trajectories.some((t) => deletedAt.has(t.trajectoryId))
        )
      );
    };
    const deadline = Date.now() + 240_000;
    for (let round = 0; ; round++) {
      const manifestKeys = (await store.list(keys.trajectoryPrefix(campaignId))).filter(
        (k) => k.endsWith('/manifest.json') && !seenManifests.has(k)
      );
      for (const k of manifestKeys) {
        seenManifests.add(k);
        const m = await store.getJson(k, TrajectoryManifestSchema);
        if (m.source !== 'rollout' || m.status !== 'ok') continue;
        await store.remove(m.stepsKey);
        deletedAt.set(m.trajectoryId, Date.now());
      }
      if (round % 8 === 7 && (await metDeleted())) break;
      assert.ok(Date.now() < deadline, `the trainer met none of ${deletedAt.size} deleted trajectories in 240 s`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const deletionsEnded = Date.now();
    const stepsAtEnd = (await campaign.status()).trainSteps;

    // Training on intact groups resumes once deletions stop.
    await waitFor(
      'train steps on intact data',
      async () => {
        const ledger = await readLedger(store, campaignId);
        return ledger.some((e) => (e.startedAt ?? e.createdAt) > deletionsEnded && e.consumed.length > 0)
          ? true
          : undefined;
      },
      300_000
    );
    await campaign.stop();
    const result = await campaign.result();
    assert.ok(result.trainSteps > stepsAtEnd, `train steps ${result.trainSteps} > ${stepsAtEnd}`);

    const lineage = await readLineage(store, campaignId);
    assert.deepEqual(lineage.problems, [], 'one unbroken checkpoint chain, nothing consumed twice');
    // No train step consumed a trajectory after its steps were deleted.
    for (const e of lineage.ledger) {
      const started = e.startedAt ?? e.createdAt;
      const bad = e.consumed.filter((c) => (deletedAt.get(c.trajectoryId) ?? Infinity) < started);
      assert.deepEqual(bad, [], `train step ${e.trainStep} consumed deleted trajectories`);
    }
    // Every skip names the deleted object and why.
    const skipped = lineage.ledger.flatMap((e) => e.skipped ?? []).filter((x) => deletedAt.has(x.trajectoryId));
    for (const x of skipped) {
      assert.match(x.key, /steps\.jsonl$/, 'the skip names the deleted object');
      assert.ok(x.reason.length > 0);
    }
    console.log(
      `[deleted-objects] ${deletedAt.size} trajectories deleted; skipped in the ledger: ${skipped.length}; ` +
        `train steps ${result.trainSteps}`
    );
  }
);
