/**
 * Injects one planned soak fault into a running campaign on a ChaosCluster (infra/chaos.ts) and watches,
 * in the background, for the progress that shows the campaign recovered (bench/lib/soak-schedule.ts).
 * Repeated faults: kill -9 by PID (checked gone), a down time, a restart. One-offs: a policy server killed
 * for good, a running task-group child terminated, a deploy of the orchestrator under Worker Versioning.
 */
import type { Client } from '@temporalio/client';
import type { CampaignHandle } from '../../client/dartflow-client';
import { sleep, triggerFor, waitFor, type ChaosCluster } from '../../infra/chaos';
import type { CampaignStatus } from '../../schemas/campaign';
import { recoveryFor, type SoakFaultKind, type SoakPlannedFault } from './soak-schedule';

export interface SoakFaultOutcome {
  index: number;
  /** 'cluster-crash': every process of the cluster was down between two segments (bench/lib/soak-state.ts). */
  kind: SoakFaultKind | 'cluster-crash';
  /** The moment the fault waited for, and whether it held when the fault was injected. */
  trigger: string;
  triggered: boolean;
  /** ms since the soak started. */
  atMs: number;
  downMs: number;
  killedPid?: number;
  restartedPid?: number;
  /** What the one-offs did (the terminated workflow, the builds of a deploy). */
  detail?: string;
  /** The fault itself could not be carried out (e.g. no running task group to terminate). */
  error?: string;
  recoveredBy: string;
  /** fault → the recovery progress, when observed (cluster-crash: the cluster's restart → the progress). */
  recoverMs: number | null;
  /** The segment ended (the whole cluster went down) before the recovery was observed: not a failed recovery. */
  interruptedBySegmentEnd?: boolean;
  statusAtFault: { episodes: number; trainSteps: number; policyVersion: number } | null;
}

export interface SoakFaultContext {
  cluster: ChaosCluster;
  temporal: Client;
  campaign: CampaignHandle;
  /** ms epoch of the soak's start (fault times are relative to it). */
  startedAt: number;
  /** The policy server killed for good (never restarted). */
  doomedPolicyServer: string;
  /** Build id of the deploy's new orchestrator build. */
  deployBuildId: string;
  triggerTimeoutMs: number;
  recoveryTimeoutMs: number;
  /** Ends the background recovery watchers when the soak is over. */
  signal: AbortSignal;
  log: (line: string) => void;
}

/** Terminates the first running task group the server lists; returns its workflow id (null: none running). */
export async function terminateRunningTaskGroup(client: Client, reason: string): Promise<string | null> {
  // Groups at compressed time live about a second, and visibility lags behind the history: a listed group
  // may have finished already (its terminate then fails) and a fresh list may still be empty. Keep trying.
  for (let attempt = 0; attempt < 30; attempt++) {
    for await (const wf of client.workflow.list({
      query: `WorkflowType='taskGroupWorkflow' AND ExecutionStatus='Running'`,
    })) {
      const terminated = await client.workflow
        .getHandle(wf.workflowId, wf.runId)
        .terminate(reason)
        .then(() => true)
        .catch(() => false);
      if (terminated) return wf.workflowId;
    }
    await sleep(1_000);
  }
  return null;
}

function triggerOf(kind: SoakFaultKind): { what: string; holds: (s: CampaignStatus) => boolean } {
  if (kind === 'terminate-child') return { what: 'task groups in flight', holds: (s) => s.groupsInFlight > 0 };
  if (kind === 'policy-for-good' || kind === 'deploy')
    return { what: 'campaign running', holds: (s) => s.phase === 'running' };
  return triggerFor(kind);
}

/**
 * Carries out one fault and returns its outcome at once; `recovery` resolves when the campaign has made the
 * expected progress (or the watcher gave up), filling `recoverMs` in the same outcome object.
 */
export async function injectSoakFault(
  ctx: SoakFaultContext,
  index: number,
  planned: SoakPlannedFault
): Promise<{ outcome: SoakFaultOutcome; recovery: Promise<void> }> {
  const since = () => Date.now() - ctx.startedAt;
  let last: CampaignStatus | null = null;
  const status = async () => (last = await ctx.campaign.status());
  const trig = triggerOf(planned.kind);
  const triggered = await waitFor(trig.what, async () => trig.holds(await status()), ctx.triggerTimeoutMs, 200).then(
    () => true,
    () => false
  );
  const atFault = last as CampaignStatus | null;
  const atMs = since();
  const outcome: SoakFaultOutcome = {
    index,
    kind: planned.kind,
    trigger: trig.what,
    triggered,
    atMs,
    downMs: planned.downMs,
    recoveredBy: '',
    recoverMs: null,
    statusAtFault: atFault
      ? { episodes: atFault.episodes, trainSteps: atFault.trainSteps, policyVersion: atFault.policyVersion }
      : null,
  };
  try {
    switch (planned.kind) {
      case 'policy-for-good':
        outcome.killedPid = await ctx.cluster.killForGood('policy', ctx.doomedPolicyServer);
        outcome.detail = `${ctx.doomedPolicyServer} killed for good`;
        break;
      case 'terminate-child': {
        const id = await terminateRunningTaskGroup(ctx.temporal, 'soak benchmark: a child terminated on purpose');
        if (!id) throw new Error('no running task group to terminate');
        outcome.detail = `terminated ${id}`;
        break;
      }
      case 'deploy': {
        const from = ctx.cluster.orchestratorBuild;
        const d = await ctx.cluster.deployOrchestrator(ctx.deployBuildId);
        outcome.killedPid = d.oldPid;
        outcome.restartedPid = d.newPid;
        outcome.detail = `orchestrator build ${from ?? '?'} → ${ctx.deployBuildId}: new build current after ${(d.cutOverMs / 1000).toFixed(1)} s, old build stopped with SIGTERM`;
        break;
      }
      default:
        outcome.killedPid = await ctx.cluster.kill(planned.kind);
        await sleep(planned.downMs);
        outcome.restartedPid = await ctx.cluster.restart(planned.kind);
    }
  } catch (err) {
    outcome.error = String(err);
  }
  ctx.log(
    `#${index} ${planned.kind}${outcome.killedPid ? ` (PID ${outcome.killedPid}${outcome.restartedPid ? ` → ${outcome.restartedPid}` : ''})` : ''} at ${(atMs / 1000).toFixed(0)} s${triggered ? ` during ${trig.what}` : ''}${outcome.detail ? `: ${outcome.detail}` : ''}${outcome.error ? ` FAILED: ${outcome.error}` : ''}`
  );
  const recovery = (async () => {
    const base =
      atFault ??
      (await waitFor('status after the fault', status, ctx.recoveryTimeoutMs, 500, ctx.signal).catch(() => null));
    if (!base) return;
    const check = recoveryFor(planned.kind, base);
    outcome.recoveredBy = check.what;
    await waitFor(
      `progress after the ${planned.kind} fault (${check.what})`,
      async () => check.holds(await status()),
      ctx.recoveryTimeoutMs,
      1000,
      ctx.signal
    );
    outcome.recoverMs = since() - atMs;
    ctx.log(`#${index} ${planned.kind} recovered in ${(outcome.recoverMs / 1000).toFixed(1)} s (${check.what})`);
  })().catch(() => undefined);
  return { outcome, recovery };
}

/**
 * The cluster was brought back after a whole-cluster crash (a segment's end): records it as a fault and
 * watches for the progress that needs every role back — both more episodes and more train steps than
 * the last status the previous segment saw. `recoverMs` counts from the restart, not across the gap.
 */
export function watchClusterCrashRecovery(
  ctx: Pick<SoakFaultContext, 'campaign' | 'startedAt' | 'recoveryTimeoutMs' | 'signal' | 'log'>,
  index: number,
  crash: { lastAliveAt: number; restartedAt: number; planned: boolean },
  atCrash: { episodes: number; trainSteps: number; policyVersion: number } | null
): { outcome: SoakFaultOutcome; recovery: Promise<void> } {
  const base = atCrash ?? { episodes: 0, trainSteps: 0, policyVersion: 0 };
  const outcome: SoakFaultOutcome = {
    index,
    kind: 'cluster-crash',
    trigger: crash.planned
      ? 'the segment reached --segment-minutes'
      : 'the driver stopped (its machine or session went away)',
    triggered: true,
    atMs: crash.lastAliveAt - ctx.startedAt,
    downMs: crash.restartedAt - crash.lastAliveAt,
    detail: `every process of the cluster killed${crash.planned ? ' with SIGKILL' : ''}; brought back over the same SQLite file, MinIO data dir and ports after ${((crash.restartedAt - crash.lastAliveAt) / 60_000).toFixed(1)} min`,
    recoveredBy: `episodes > ${base.episodes} and trainSteps > ${base.trainSteps}`,
    recoverMs: null,
    statusAtFault: atCrash,
  };
  ctx.log(`#${index} cluster-crash: ${outcome.detail}`);
  const recovery = waitFor(
    `progress after the cluster crash (${outcome.recoveredBy})`,
    async () => {
      const s = await ctx.campaign.status();
      return s.episodes > base.episodes && s.trainSteps > base.trainSteps;
    },
    ctx.recoveryTimeoutMs,
    1000,
    ctx.signal
  )
    .then(() => {
      outcome.recoverMs = Date.now() - crash.restartedAt;
      ctx.log(`#${index} cluster-crash recovered in ${(outcome.recoverMs / 1000).toFixed(1)} s after the restart`);
    })
    .catch(() => undefined);
  return { outcome, recovery };
}
