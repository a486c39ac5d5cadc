/**
 * The campaign audit behind the chaos test and benchmark (pure: the evidence is collected by
 * infra/chaos.ts from MinIO and Temporal histories). It checks the invariants a crash must not break:
 *
 * - every trajectory is consumed by at most one train step (pooled successes excepted, by design);
 * - every completed (ok) trajectory is consumed or accounted for with a reason (discard record, eval,
 *   behaviour-cloning demo);
 * - checkpoint versions are 0..n and form one tree rooted at v0 (every version's parent is an earlier
 *   version; after a rollback or a pin the next version branches off an older one), and each ledger entry
 *   links its two versions;
 * - no train step consumed a trajectory sampled (even in part) by a version off the lineage of the
 *   version it trained (an abandoned branch, or a newer version);
 * - no infrastructure failure is recorded as a reward: non-ok manifests carry reward null, every reward
 *   a task group reported came from a completed episode activity with status ok (failed attempts never
 *   turn into a reward), lost episodes are never trained on, the ledger's reward is the manifest's, and
 *   an ok rollout trajectory's steps were all answered by a policy server;
 * - no object a train step needed was missing or corrupt (nothing in a campaign deletes trajectories, so a
 *   group the trainer left out is data lost: it is accounted for, and reported as a problem with the reason).
 */

export interface ManifestEvidence {
  trajectoryId: string;
  groupId: string;
  /** 'campaign' = campaigns/<id>/…, 'eval' = campaigns/<id>.eval/… (evaluations and canary gates). */
  scope: 'campaign' | 'eval';
  status: string;
  reward: number | null;
  source: string;
  numSteps: number;
  /** Problems found in the trajectory's steps (line count, policy answers), or null when sound. */
  stepIssue: string | null;
  /** Versions that sampled the trajectory's steps (lineage check of the train steps that consumed it). */
  minPolicyVersion?: number;
  maxPolicyVersion?: number;
}

export interface LedgerEvidence {
  trainStep: number;
  fromVersion: number;
  toVersion: number;
  consumed: Array<{ trajectoryId: string; groupId: string; reward: number; injectedFromPool: boolean }>;
  /** Groups of the batch the trainer left out because an object of theirs was missing or corrupt. */
  skipped?: Array<{ groupId: string; reason: string }>;
}

export interface CheckpointEvidence {
  version: number;
  parentVersion: number | null;
}

export interface DiscardEvidence {
  groupId: string;
  event: string;
  trajectories: Array<{ trajectoryId: string; reason: string }>;
}

/** What one task group's Temporal history says (activity results, failures, its final summary). */
export interface GroupEvidence {
  groupId: string;
  /** The workflow's result, when it completed. */
  summary?: {
    trajectories: Array<{ trajectoryId: string; reward: number | null; injectedFromPool: boolean }>;
    lostTrajectoryIds: string[];
    infraFailures: number;
  };
  /** trajectoryId → reward of every completed episode activity result with status ok. */
  completedOk: Record<string, number>;
  /** Trajectory ids with a failed episode attempt (a failed runEpisodes outcome or a failed runEpisode). */
  failedAttempts: string[];
}

export interface AuditInput {
  manifests: ManifestEvidence[];
  ledger: LedgerEvidence[];
  checkpoints: CheckpointEvidence[];
  discards: DiscardEvidence[];
  groups: GroupEvidence[];
}

export interface AuditReport {
  trajectories: {
    total: number;
    byStatus: Record<string, number>;
    ok: number;
    okRollout: number;
    consumed: number;
    pooledReuses: number;
    accounted: Record<string, number>;
    unaccounted: number;
  };
  versions: number;
  trainSteps: number;
  groups: number;
  episodesWithFailedAttempts: number;
  failedAttemptsRecoveredOk: number;
  lostEpisodes: number;
  /** Trajectories trained into a version whose lineage does not contain the versions that sampled them. */
  trainedFromAbandonedBranch: number;
  /** Every invariant violation found (empty = the campaign is sound). */
  problems: string[];
}

const inc = (m: Record<string, number>, k: string, by = 1) => {
  m[k] = (m[k] ?? 0) + by;
};

export function auditCampaign(input: AuditInput): AuditReport {
  const problems: string[] = [];
  const manifests = new Map<string, ManifestEvidence>();
  const byStatus: Record<string, number> = {};
  for (const m of input.manifests) {
    manifests.set(`${m.scope}/${m.trajectoryId}`, m);
    inc(byStatus, `${m.scope}:${m.status}`);
    if (m.status !== 'ok' && m.reward !== null)
      problems.push(`${m.scope} trajectory ${m.trajectoryId} has status ${m.status} but reward ${m.reward}`);
    if (m.status === 'ok' && m.reward === null) problems.push(`ok trajectory ${m.trajectoryId} has no reward`);
    if (m.status === 'ok' && m.stepIssue) problems.push(`ok trajectory ${m.trajectoryId}: ${m.stepIssue}`);
  }

  // ---- ledger: at most once, rewards match the manifests
  const consumed = new Map<string, number>();
  let pooledReuses = 0;
  for (const e of [...input.ledger].sort((a, b) => a.trainStep - b.trainStep)) {
    for (const c of e.consumed) {
      const m = manifests.get(`campaign/${c.trajectoryId}`);
      if (!m) problems.push(`train step ${e.trainStep} consumed ${c.trajectoryId}, which has no manifest`);
      else {
        if (m.status !== 'ok')
          problems.push(`train step ${e.trainStep} consumed ${c.trajectoryId} with status ${m.status}`);
        if (m.reward !== c.reward)
          problems.push(
            `train step ${e.trainStep}: ${c.trajectoryId} trained with reward ${c.reward}, manifest says ${String(m.reward)}`
          );
      }
      if (c.injectedFromPool) {
        pooledReuses++;
        continue; // pooled successes are reused by design (DART §3.4 c)
      }
      const prev = consumed.get(c.trajectoryId);
      if (prev !== undefined)
        problems.push(`trajectory ${c.trajectoryId} consumed by train steps ${prev} and ${e.trainStep}`);
      else consumed.set(c.trajectoryId, e.trainStep);
    }
  }

  // ---- checkpoints: 0..n, one tree rooted at v0; each ledger entry links fromVersion → toVersion
  const versions = [...input.checkpoints].sort((a, b) => a.version - b.version);
  versions.forEach((c, i) => {
    if (c.version !== i) problems.push(`checkpoint versions are not 0..n: found v${c.version} at position ${i}`);
    const ok =
      c.version === 0
        ? c.parentVersion === null
        : c.parentVersion !== null && c.parentVersion >= 0 && c.parentVersion < c.version;
    if (!ok)
      problems.push(
        `v${c.version}: parent is ${String(c.parentVersion)}, expected ${c.version === 0 ? 'none' : 'an earlier version'} (broken chain)`
      );
  });
  const parentOf = new Map(versions.map((c) => [c.version, c.parentVersion]));
  const ancestorsOf = (v: number): Set<number> => {
    const out = new Set<number>();
    for (let x: number | null | undefined = v; x !== null && x !== undefined && !out.has(x); x = parentOf.get(x))
      out.add(x);
    return out;
  };
  // ---- no train step consumed data sampled off its lineage (an abandoned branch or a newer version)
  let trainedFromAbandonedBranch = 0;
  for (const e of input.ledger) {
    const line = ancestorsOf(e.fromVersion);
    for (const c of e.consumed) {
      if (c.injectedFromPool) continue;
      const m = manifests.get(`campaign/${c.trajectoryId}`);
      if (m?.minPolicyVersion === undefined || m.maxPolicyVersion === undefined) continue;
      if (!line.has(m.minPolicyVersion) || !line.has(m.maxPolicyVersion)) {
        trainedFromAbandonedBranch++;
        problems.push(
          `train step ${e.trainStep} (from v${e.fromVersion}) consumed ${c.trajectoryId}, sampled by v${m.minPolicyVersion}..v${m.maxPolicyVersion} off its lineage (an abandoned branch)`
        );
      }
    }
  }
  for (const e of input.ledger) {
    if (!parentOf.has(e.toVersion)) problems.push(`train step ${e.trainStep}: checkpoint v${e.toVersion} is missing`);
    else if (parentOf.get(e.toVersion) !== e.fromVersion)
      problems.push(`train step ${e.trainStep}: v${e.toVersion}'s parent is not v${e.fromVersion}`);
  }
  const skippedByTrainer = new Map<string, string>();
  for (const e of input.ledger)
    for (const k of e.skipped ?? []) {
      skippedByTrainer.set(k.groupId, k.reason);
      problems.push(`train step ${e.trainStep} left group ${k.groupId} out: ${k.reason}`);
    }
  const steps = new Set(input.ledger.map((e) => e.trainStep));
  if (steps.size !== input.ledger.length) problems.push('two ledger entries for one train step');

  // ---- discards: reasons per trajectory
  const discarded = new Map<string, string>();
  for (const d of input.discards) for (const t of d.trajectories) discarded.set(t.trajectoryId, t.reason);

  // ---- Temporal evidence: rewards only from completed ok episodes; lost ones never trained on
  let episodesWithFailedAttempts = 0;
  let failedAttemptsRecoveredOk = 0;
  let lostEpisodes = 0;
  const reportedLost = new Set<string>();
  for (const g of input.groups) {
    const failed = new Set(g.failedAttempts);
    episodesWithFailedAttempts += failed.size;
    for (const id of failed) if (g.completedOk[id] !== undefined) failedAttemptsRecoveredOk++;
    if (!g.summary) continue;
    lostEpisodes += g.summary.lostTrajectoryIds.length;
    for (const id of g.summary.lostTrajectoryIds) {
      reportedLost.add(id);
      if (consumed.has(id)) problems.push(`group ${g.groupId}: lost episode ${id} was trained on`);
    }
    for (const t of g.summary.trajectories) {
      if (t.injectedFromPool) continue;
      const ok = g.completedOk[t.trajectoryId];
      if (ok === undefined)
        problems.push(
          `group ${g.groupId} reported ${t.trajectoryId} with reward ${String(t.reward)} but no episode activity completed it ok` +
            (failed.has(t.trajectoryId) ? ' (its attempts failed: an infrastructure failure became a reward)' : '')
        );
      else if (ok !== t.reward)
        problems.push(
          `group ${g.groupId}: ${t.trajectoryId} reported reward ${String(t.reward)}, its episode returned ${ok}`
        );
    }
  }
  const groupById = new Map(input.groups.map((g) => [g.groupId, g]));
  for (const [id] of consumed) {
    const m = manifests.get(`campaign/${id}`);
    const g = m ? groupById.get(m.groupId) : undefined;
    if (m && m.source === 'rollout' && g?.summary && !g.summary.trajectories.some((t) => t.trajectoryId === id))
      problems.push(`${id} was trained on but its group ${m.groupId} never reported it`);
  }

  // ---- accounting of every completed trajectory
  const accounted: Record<string, number> = {};
  let ok = 0;
  let okRollout = 0;
  let unaccounted = 0;
  for (const m of input.manifests) {
    if (m.status !== 'ok') continue;
    ok++;
    if (m.scope === 'eval') {
      inc(accounted, 'eval');
      continue;
    }
    if (m.source === 'rollout') okRollout++;
    if (consumed.has(m.trajectoryId)) continue;
    const reason =
      discarded.get(m.trajectoryId) ??
      (reportedLost.has(m.trajectoryId) ? 'lost-infra' : undefined) ??
      (skippedByTrainer.has(m.groupId) ? 'trainer-skipped' : undefined) ??
      (m.source === 'demo' ? 'bc-demo' : m.source === 'precollect' ? 'precollect' : undefined);
    if (reason) inc(accounted, reason);
    else {
      unaccounted++;
      problems.push(`ok trajectory ${m.trajectoryId} (group ${m.groupId}) was neither consumed nor accounted for`);
    }
  }

  return {
    trajectories: {
      total: input.manifests.length,
      byStatus,
      ok,
      okRollout,
      consumed: consumed.size,
      pooledReuses,
      accounted,
      unaccounted,
    },
    versions: versions.length,
    trainSteps: input.ledger.length,
    groups: input.groups.length,
    episodesWithFailedAttempts,
    failedAttemptsRecoveredOk,
    lostEpisodes,
    trainedFromAbandonedBranch,
    problems,
  };
}
