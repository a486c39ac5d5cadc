/**
 * A campaign's lineage: its checkpoint chain, which trajectories each train step consumed (the ledger),
 * and why the other completed trajectories were not trained on (discard records).
 */
import { listCheckpoints } from '../activities/trainer/checkpoints';
import { DiscardRecordSchema, type DiscardRecord } from '../schemas/discards';
import { LedgerEntrySchema, type CheckpointManifest, type LedgerEntry } from '../schemas/records';
import { keys } from '../storage/keys';
import type { ObjectStore } from '../storage/object-store';

export interface Lineage {
  checkpoints: CheckpointManifest[];
  ledger: LedgerEntry[];
  /** Discard records: completed trajectories not trained on, with the reason (workflows/logic/discards.ts). */
  discards: DiscardRecord[];
  /** Problems found: broken parent links, trajectories consumed twice, ledger without checkpoint. */
  problems: string[];
}

export async function readLineage(store: ObjectStore, campaignId: string): Promise<Lineage> {
  const checkpoints = await listCheckpoints(store, campaignId);
  const ledger: LedgerEntry[] = [];
  for (const key of await store.list(keys.ledgerPrefix(campaignId)))
    ledger.push(await store.getJson(key, LedgerEntrySchema));
  ledger.sort((a, b) => a.trainStep - b.trainStep);
  const discards: DiscardRecord[] = [];
  for (const key of await store.list(keys.discardPrefix(campaignId)))
    discards.push(await store.getJson(key, DiscardRecordSchema));
  const problems: string[] = [];
  const versions = new Set(checkpoints.map((c) => c.version));
  for (const c of checkpoints) {
    if (c.parentVersion !== null && !versions.has(c.parentVersion))
      problems.push(`v${c.version}: parent v${c.parentVersion} is missing`);
  }
  const seen = new Map<string, number>();
  for (const e of ledger) {
    if (!versions.has(e.toVersion)) problems.push(`train step ${e.trainStep}: checkpoint v${e.toVersion} is missing`);
    for (const t of e.consumed) {
      if (t.injectedFromPool) continue; // pooled successes are reused by design (DART §3.4 c)
      const prev = seen.get(t.trajectoryId);
      if (prev !== undefined)
        problems.push(`trajectory ${t.trajectoryId} consumed by train steps ${prev} and ${e.trainStep}`);
      seen.set(t.trajectoryId, e.trainStep);
    }
  }
  const lost = new Set(
    discards.flatMap((d) => d.trajectories.filter((t) => t.reason === 'lost-infra').map((t) => t.trajectoryId))
  );
  for (const id of seen.keys())
    if (lost.has(id)) problems.push(`trajectory ${id} was lost to an infrastructure failure but trained on`);
  return { checkpoints, ledger, discards, problems };
}
