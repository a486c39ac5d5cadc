/**
 * Runs one campaign on a bench cluster for a fixed measurement window and reads back what it recorded:
 * the window opens when the first rollout episode leases an env (or `warmupSeconds` later, to measure the
 * steady state without the ramp-up) and closes when the bench asks the campaign to stop (graceful: in-flight
 * work drains, then a final evaluation).
 */
import type { CampaignConfigInput } from '../../schemas/config';
import type { CampaignStatus } from '../../schemas/campaign';
import type { LedgerEntry, TrajectoryManifest } from '../../schemas/records';
import type { BenchCluster } from './bench-cluster';
import { readLedger, readManifests, waitFor } from './bench-cluster';
import type { EpisodeTimes, TimeWindow, TrainStepTimes } from './efficiency-metrics';
import { envBusySeconds } from './env-held';
import { episodeStorageMs } from './overhead-metrics';
import { coresBetween, sampleCpu, serverPids, type CpuSample } from './proc-cpu';

export interface CampaignWindowRun {
  campaignId: string;
  window: TimeWindow;
  /** Rollout episodes of the campaign (evaluation episodes are in `evalManifests`). */
  manifests: TrajectoryManifest[];
  evalManifests: TrajectoryManifest[];
  ledger: LedgerEntry[];
  status: CampaignStatus;
  /** Cores used per process during the window. */
  cores: Record<string, number>;
  /**
   * Slot-seconds the env workers counted as held by an episode between the window's opening and closing
   * readings (`overMs` apart); absent when their metrics could not be read.
   */
  envBusy?: { slotSeconds: number; overMs: number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function rolePids(cluster: BenchCluster): Record<string, number | undefined> {
  return {
    ...Object.fromEntries(cluster.workers.children.map((c) => [c.name, c.process.pid])),
    ...serverPids(),
  };
}

export async function runCampaignWindow(
  cluster: BenchCluster,
  config: CampaignConfigInput & { campaign: { id: string } },
  opts: {
    seconds: number;
    warmupSeconds?: number;
    /** Keep the window open past `seconds` until this many train steps committed in it (an A/B needs ≥ 10 per mode). */
    minTrainSteps?: number;
    /** Hard cap on the window with `minTrainSteps` (default 4 × seconds). */
    maxSeconds?: number;
    log?: (line: string) => void;
  }
): Promise<CampaignWindowRun> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const id = config.campaign.id;
  const campaign = await cluster.client.startCampaign(config);
  // The window starts once episodes run (setup, the v0 model rollout and policy loading come before).
  await waitFor(
    `${id}: first episodes`,
    async () => ((await campaign.status()).episodesInFlight > 0 ? true : undefined),
    180_000
  );
  const warmupMs = (opts.warmupSeconds ?? 0) * 1000;
  if (warmupMs > 0) {
    log(`  [${id}] warm-up: the window opens in ${opts.warmupSeconds} s`);
    await sleep(warmupMs);
  }
  const warmedUpAt = Date.now();
  const pids = rolePids(cluster);
  const cpuStart: CpuSample = sampleCpu(pids);
  const envMetrics = cluster.workers.children.filter((c) => c.role === 'env').flatMap((c) => c.metricsUrl ?? []);
  const busyStart = await envBusySeconds(envMetrics, cluster.namespace);
  const busyStartAt = Date.now();
  const deadline = Date.now() + opts.seconds * 1000;
  // A progress line is not worth failing the run for: under load the orchestrator may not answer a query
  // within its deadline (the campaign goes on meanwhile). Say so and keep the last status.
  const tryStatus = (): Promise<CampaignStatus | undefined> =>
    campaign.status().catch((err: unknown) => {
      log(`  [${id}] status query failed (${err instanceof Error ? err.message : String(err)}); the campaign goes on`);
      return undefined;
    });
  let status = await tryStatus();
  const stepsAtStart = status?.trainSteps ?? 0;
  const minSteps = opts.minTrainSteps ?? 0;
  const maxSeconds = opts.maxSeconds ?? 4 * opts.seconds;
  const hardDeadline = warmedUpAt + maxSeconds * 1000;
  const stepsInWindow = () => (status?.trainSteps ?? 0) - stepsAtStart;
  const windowOpen = () => Date.now() < deadline || (stepsInWindow() < minSteps && Date.now() < hardDeadline);
  while (windowOpen()) {
    await sleep(Math.max(0, Math.min(10_000, (Date.now() < deadline ? deadline : hardDeadline) - Date.now())));
    const next = await tryStatus();
    if (!next) continue;
    status = next;
    const left =
      Date.now() < deadline
        ? `${Math.round((deadline - Date.now()) / 1000)} s left`
        : `past ${opts.seconds} s: waiting for ${minSteps} train steps in the window`;
    log(
      `  [${id}] ${left}: episodes ${status.episodes}, train steps ${status.trainSteps} (${stepsInWindow()} in the window), in flight ${status.episodesInFlight}, buffered ${status.bufferedGroups}`
    );
  }
  if (stepsInWindow() < minSteps)
    log(`  [${id}] only ${stepsInWindow()} of ${minSteps} train steps in the window before the ${maxSeconds} s cap`);
  const end = Date.now();
  const cores = coresBetween(cpuStart, sampleCpu(pids));
  const busyEnd = await envBusySeconds(envMetrics, cluster.namespace);
  // A worker restarted inside the window starts its counter again: then there is no figure, not a wrong one.
  const envBusy =
    busyStart !== undefined && busyEnd !== undefined && busyEnd >= busyStart
      ? { slotSeconds: busyEnd - busyStart, overMs: Date.now() - busyStartAt }
      : undefined;
  await campaign.stop();
  await Promise.race([
    campaign.result(),
    // OSWorld-like resets have a tail up to 5 minutes at real time.
    sleep(600_000).then(() => {
      throw new Error(`${id}: did not finish within 10 minutes of stop`);
    }),
  ]);
  status = (await tryStatus()) ?? status;
  if (!status) throw new Error(`${id}: the campaign never answered its status query`);
  const [manifests, evalManifests, ledger] = await Promise.all([
    readManifests(cluster.store, id),
    readManifests(cluster.store, `${id}.eval`),
    readLedger(cluster.store, id),
  ]);
  const rollouts = manifests.filter((m) => m.source === 'rollout' && m.timing);
  const start = warmupMs > 0 ? warmedUpAt : Math.min(...rollouts.map((m) => m.timing!.acquiredAt));
  return {
    campaignId: id,
    window: { start, end },
    manifests,
    evalManifests,
    ledger,
    status,
    cores,
    ...(envBusy ? { envBusy } : {}),
  };
}

export function episodeTimes(manifests: readonly TrajectoryManifest[]): EpisodeTimes[] {
  return manifests
    .filter((m) => m.timing)
    .map((m) => {
      const storageMs = episodeStorageMs({ ...m.timing!, numSteps: m.numSteps });
      return {
        numSteps: m.numSteps,
        acquiredAt: m.timing!.acquiredAt,
        // The slot is held until the trajectory is stored (then released).
        endedAt: m.timing!.writeStartedAt + storageMs,
        envIntervals: m.timing!.envIntervals,
        actMs: m.timing!.actMs,
        storageMs,
      };
    });
}

/** Train steps with their actions: steps of the online trajectories each ledger entry consumed. */
export function trainStepTimes(
  ledger: readonly LedgerEntry[],
  manifests: readonly TrajectoryManifest[]
): TrainStepTimes[] {
  const steps = new Map(manifests.map((m) => [m.trajectoryId, m.numSteps]));
  return ledger
    .filter((e) => e.startedAt !== undefined)
    .map((e) => ({
      startedAt: e.startedAt!,
      endedAt: e.createdAt,
      actions: e.consumed.filter((c) => !c.injectedFromPool).reduce((a, c) => a + (steps.get(c.trajectoryId) ?? 0), 0),
    }));
}
