/**
 * Reads back what a soak campaign left behind, in one pass: the chaos audit's evidence (manifests, ledger,
 * checkpoints, discards, every workflow history), with each manifest's timing and each run's history size
 * kept on the way, plus the ledger's step times. Everything in the namespace and bucket belongs to the
 * campaign (a private cluster, or a bench cluster's scratch namespace and bucket).
 */
import type { Client } from '@temporalio/client';
import { collectAuditEvidence, type HistoryStats } from '../../infra/chaos';
import { auditCampaign, type AuditReport } from '../../infra/chaos-audit';
import type { TrajectoryManifest } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { readLedger } from './bench-cluster';
import { episodeTimes, trainStepTimes } from './campaign-window';
import type { EpisodeTimes, TrainStepTimes } from './efficiency-metrics';
import { runHistoryStats, summarizeHistories, type HistorySummary, type RunHistoryStats } from './history-stats';

export interface SoakEvidence {
  audit: AuditReport;
  /** Retries, timeouts, non-determinism errors, workflow tasks by build (infra/chaos.ts). */
  serverStats: HistoryStats;
  runs: RunHistoryStats[];
  historySummary: HistorySummary;
  /** Env-slot leases of rollout and evaluation episodes (both hold env slots). */
  episodes: EpisodeTimes[];
  steps: TrainStepTimes[];
  /** The first rollout episode's lease: where the soak's window opens. */
  firstLeaseAt: number | null;
  rolloutEpisodes: number;
}

export async function collectSoakEvidence(
  store: ObjectStore,
  temporal: Client,
  campaignId: string,
  log: (line: string) => void
): Promise<SoakEvidence> {
  const episodes: EpisodeTimes[] = [];
  const runs: RunHistoryStats[] = [];
  let firstLeaseAt: number | null = null;
  let rolloutEpisodes = 0;
  const evidence = await collectAuditEvidence(store, temporal, campaignId, {
    onManifest: (m: TrajectoryManifest) => {
      const [t] = episodeTimes([m]);
      if (t) episodes.push(t);
      if (m.source === 'rollout') {
        rolloutEpisodes++;
        if (m.timing) firstLeaseAt = Math.min(firstLeaseAt ?? Infinity, m.timing.acquiredAt);
      }
    },
    onHistory: (wf, history) => runs.push(runHistoryStats(wf, history)),
    onProgress: (what, n) => log(`  read ${n} ${what}`),
  });
  const steps = trainStepTimes(await readLedger(store, campaignId), []);
  return {
    audit: auditCampaign(evidence.input),
    serverStats: evidence.history,
    runs,
    historySummary: summarizeHistories(runs),
    episodes,
    steps,
    firstLeaseAt,
    rolloutEpisodes,
  };
}
