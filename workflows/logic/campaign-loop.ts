/**
 * The campaign loop as an explicit, pure state machine: `tick(state, ctx)` decides what starts now and
 * applies the bookkeeping to the state; the workflow only carries the returned actions out (start a
 * child workflow, continue-as-new, finish). Nothing long runs inside the campaign workflow itself: task
 * groups, train steps, model rollouts and evaluations are child workflows that report back by signal, so
 * continue-as-new never waits for them (their refs travel in the state).
 *
 * Pure and Node-free: unit-tested directly (test/workflows/campaign-loop.test.ts).
 */
import {
  compactLineage,
  planNextGroup,
  markGroupStarted,
  selectTrainBatch,
  takeFromBuffer,
  shouldStop,
  evalMeetsTarget,
  isSuccessReward,
  type BufferedGroup,
  type CampaignState,
  type GroupPlan,
  type TrainBatch,
} from './campaign-state';

export type CampaignAction =
  | { kind: 'startGroups'; plans: GroupPlan[] }
  | {
      kind: 'startTrainStep';
      workflowId: string;
      batch: TrainBatch;
      /** The buffered groups the step took (for the discard records of what it leaves out). */
      taken: BufferedGroup[];
      trainStep: number;
      fromVersion: number;
    }
  /** Buffered groups none of which is trainable (sync mode's barrier): recorded as discards. */
  | { kind: 'dropBatch'; batch: TrainBatch; taken: BufferedGroup[] }
  | { kind: 'startRollout'; workflowId: string; version: number }
  | { kind: 'startEval'; workflowId: string; version: number }
  | { kind: 'continueAsNew' }
  | { kind: 'complete' };

export interface TickContext {
  nowMs: number;
  /** Temporal suggests continue-as-new (or a test hook asks for it). */
  continueAsNewDue: boolean;
  /** How curation reads rewards (campaign-state.ts CurationMode; false only for runs recorded before it). */
  successRewards?: boolean;
  /**
   * After an evaluation that meets the stop rule's target, evaluate the next served version at once rather
   * than `eval.everyVersions` later (false only for runs recorded before it; see confirmingTarget).
   */
  confirmTargetEarly?: boolean;
}

/** The version an evaluation should measure: the newest version every live server serves, else the head. */
export function servedVersion(s: CampaignState): number | null {
  const served = Object.values(s.servedVersions);
  if (served.length === 0) return null;
  return served.every((v) => v === served[0]) ? served[0]! : null;
}

function childId(s: CampaignState, what: string, version: number): string {
  // Unique per campaign run and state: a retried decision after continue-as-new gets a new id.
  return `${s.campaignId}-${what}-v${version}-r${s.runIndex}-s${s.trainSteps}-g${s.groupSeq}`;
}

function startTrain(s: CampaignState, ctx: TickContext, minGroups?: number): CampaignAction | null {
  const nowMs = ctx.nowMs;
  const batch = selectTrainBatch(s, {
    ...(minGroups !== undefined ? { minGroups } : {}),
    ...(ctx.successRewards !== undefined ? { successRewards: ctx.successRewards } : {}),
  });
  if (!batch) return null;
  const takenIds = new Set(batch.takenGroupIds);
  const taken = s.buffer.filter((g) => takenIds.has(g.groupId));
  takeFromBuffer(s, batch);
  if (batch.groups.length === 0) return { kind: 'dropBatch', batch, taken };
  const trainStep = s.trainSteps + 1;
  const workflowId = childId(s, 'train', s.policyVersion);
  s.train = {
    workflowId,
    startedAtMs: nowMs,
    run: s.runIndex,
    trainStep,
    fromVersion: s.policyVersion,
    groups: batch.groups.map((g) => ({
      groupId: g.groupId,
      taskId: g.taskId,
      trajectoryIds: g.trajectories.filter((t) => !t.injectedFromPool).map((t) => t.trajectoryId),
    })),
  };
  return { kind: 'startTrainStep', workflowId, batch, taken, trainStep, fromVersion: s.policyVersion };
}

/** Starts the rollout of the pending version when none is in flight (also used by the warm start). */
export function startRollout(s: CampaignState, nowMs: number): CampaignAction | null {
  if (s.rollout || s.pendingRollout === null || s.endpoints.length === 0) return null;
  const version = s.pendingRollout;
  s.pendingRollout = null;
  const workflowId = childId(s, 'rollout', version);
  s.rollout = { workflowId, startedAtMs: nowMs, run: s.runIndex, version };
  return { kind: 'startRollout', workflowId, version };
}

/** Starts an evaluation of `version` when none is in flight (also used by the warm start). */
export function startEval(s: CampaignState, nowMs: number, version: number): CampaignAction | null {
  if (s.evaluation || s.heldOut.length === 0 || s.endpoints.length === 0) return null;
  const workflowId = childId(s, 'eval', version);
  s.evaluation = { workflowId, startedAtMs: nowMs, run: s.runIndex, version };
  s.lastEvalVersion = version;
  s.rolloutsSinceEval = 0;
  return { kind: 'startEval', workflowId, version };
}

/**
 * The last evaluation met the stop rule's target and the rule needs more than one in a row: the confirming
 * evaluation need not wait `eval.everyVersions` versions (each wait costs RL time at the end of a campaign,
 * which is what the stop rule is there to save). It still measures a newer served version, never the same
 * one again (greedy episodes on the same held-out seeds would repeat the same result).
 */
export function confirmingTarget(s: CampaignState): boolean {
  const c = s.config.campaign;
  if (c.targetSuccess === undefined || (c.targetConsecutiveEvals ?? 1) < 2) return false;
  const last = s.evals.at(-1);
  return last !== undefined && evalMeetsTarget(last, c.targetSuccess, c.targetMinEpisodesPerFamily ?? 0);
}

/**
 * Training success of each held-out family: the share of successes over its tasks' recent rollout episodes
 * (temperature 1; null for a family without any yet). Pure bookkeeping from the task statistics.
 */
export function familyRolloutSuccess(s: CampaignState): Record<string, number | null> {
  const familyOf = new Map(s.tasks.map((t) => [t.id, t.family]));
  const sums: Record<string, { ok: number; n: number }> = {};
  for (const t of s.heldOut) sums[t.family] = { ok: 0, n: 0 };
  for (const st of Object.values(s.stats)) {
    const acc = sums[familyOf.get(st.taskId) ?? ''];
    if (!acc) continue;
    for (const r of st.recentRewards) {
      acc.ok += isSuccessReward(s, r) ? 1 : 0;
      acc.n++;
    }
  }
  return Object.fromEntries(Object.entries(sums).map(([f, a]) => [f, a.n === 0 ? null : a.ok / a.n]));
}

/**
 * The last evaluation has every family's greedy success within eval.nearTargetMargin of
 * campaign.targetSuccess (false without a target or an evaluation).
 */
export function lastEvalNearTarget(s: CampaignState): boolean {
  const target = s.config.campaign.targetSuccess;
  const last = s.evals.at(-1);
  if (target === undefined || !last) return false;
  const rates = Object.values(last.perFamily);
  return rates.length > 0 && rates.every((r) => r >= target - s.config.eval.nearTargetMargin);
}

/**
 * Versions between evaluations. Far from the target (some family's training success below
 * eval.sparseBelowRolloutSuccess) an evaluation only adds a curve point, so with eval.sparseEveryVersions set
 * they come sparser and their env time goes to RL; otherwise they come every eval.everyVersions, every
 * eval.nearTargetEveryVersions once the last one came close to the target (the wait for the next one is
 * then what is left of the campaign), and a target met is confirmed on the next version.
 */
export function evalEveryVersions(s: CampaignState, ctx: Pick<TickContext, 'confirmTargetEarly'>): number {
  if (ctx.confirmTargetEarly && confirmingTarget(s)) return 1;
  const e = s.config.eval;
  let every = e.everyVersions;
  if (e.sparseEveryVersions !== null && e.sparseEveryVersions > e.everyVersions) {
    const far = Object.values(familyRolloutSuccess(s)).some((sr) => sr === null || sr < e.sparseBelowRolloutSuccess);
    if (far) every = e.sparseEveryVersions;
  }
  // eval.nearTargetEveryVersions defaults to null in the schema; state carried from before the field lacks it.
  const near = e.nearTargetEveryVersions ?? null;
  return near !== null && near < every && lastEvalNearTarget(s) ? near : every;
}

/** Evaluate once enough new versions are served (the curve point then measures what the servers serve). */
function dueEval(s: CampaignState, ctx: TickContext): CampaignAction | null {
  const served = servedVersion(s);
  if (served === null || served === s.lastEvalVersion) return null;
  const every = evalEveryVersions(s, ctx);
  if (s.lastEvalVersion >= 0 && s.rolloutsSinceEval < every) return null;
  return startEval(s, ctx.nowMs, served);
}

function fillCapacity(s: CampaignState, nowMs: number, maxGroups = Infinity): GroupPlan[] {
  const plans: GroupPlan[] = [];
  for (let plan = planNextGroup(s); plan && plans.length < maxGroups; plan = planNextGroup(s)) {
    markGroupStarted(s, plan, nowMs);
    plans.push(plan);
  }
  return plans;
}

/** Draining after a stop: nothing new starts; a final evaluation of the served head, then complete. */
function drainTick(s: CampaignState, ctx: TickContext): CampaignAction[] {
  if (s.phase !== 'draining') s.phase = 'draining';
  const actions: CampaignAction[] = [];
  const rollout = startRollout(s, ctx.nowMs);
  if (rollout) actions.push(rollout);
  const busy = Object.keys(s.inFlight).length > 0 || s.train !== null || s.rollout !== null;
  if (busy) return ctx.continueAsNewDue ? [...actions, { kind: 'continueAsNew' }] : actions;
  const served = servedVersion(s) ?? s.policyVersion;
  if (s.evaluation === null && s.heldOut.length > 0 && s.lastEvalVersion !== served && s.endpoints.length > 0) {
    const ev = startEval(s, ctx.nowMs, served);
    if (ev) return [...actions, ev];
  }
  if (s.evaluation !== null) return ctx.continueAsNewDue ? [...actions, { kind: 'continueAsNew' }] : actions;
  s.phase = 'completed';
  return [...actions, { kind: 'complete' }];
}

/**
 * One decision step. Async mode (DART): fill env capacity rollout-wise, start a train step whenever
 * enough eligible groups are buffered (the trainer never waits for model sync; if a canary gate later
 * refuses a version, everything trained from it is abandoned along the lineage), roll the newest trained
 * version out when no rollout is in flight, evaluate served versions. Sync mode (the coupled baseline):
 * a batch of maxGroups groups → barrier → train → roll out to every server → next batch.
 */
export function tick(s: CampaignState, ctx: TickContext): CampaignAction[] {
  if (s.phase === 'completed') return [{ kind: 'complete' }];
  if (shouldStop(s, ctx.nowMs) || s.phase === 'draining') return drainTick(s, ctx);
  const actions: CampaignAction[] = [];
  const push = (a: CampaignAction | null) => {
    if (a) actions.push(a);
  };
  push(startRollout(s, ctx.nowMs));
  push(dueEval(s, ctx));
  if (!s.paused && s.endpoints.length > 0) {
    if (s.config.campaign.mode === 'sync') {
      const idle = Object.keys(s.inFlight).length === 0 && !s.train && !s.rollout && s.pendingRollout === null;
      if (idle) {
        // The barrier: everything collected trains now (or is recorded as not trainable), then a new batch.
        const trained = s.buffer.length > 0 ? startTrain(s, ctx, 0) : null;
        push(trained);
        if (!trained || trained.kind === 'dropBatch') {
          const plans = fillCapacity(s, ctx.nowMs, s.config.trainer.maxGroups);
          if (plans.length > 0) actions.push({ kind: 'startGroups', plans });
        }
      }
    } else {
      const plans = fillCapacity(s, ctx.nowMs);
      if (plans.length > 0) actions.push({ kind: 'startGroups', plans });
      // When continue-as-new is due no new step starts here; the next run starts it at once.
      if (!s.train && !ctx.continueAsNewDue) push(startTrain(s, ctx));
    }
  }
  compactLineage(s);
  if (ctx.continueAsNewDue) actions.push({ kind: 'continueAsNew' });
  return actions;
}
