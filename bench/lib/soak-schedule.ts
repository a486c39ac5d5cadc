/**
 * The soak benchmark's fault plan (issue 12): the chaos harness's repeated faults (kill -9 + restart of every
 * role, Temporal and MinIO restarts; `chaosSchedule`) with three one-off faults slotted in at seeded
 * places, and what counts as the campaign having recovered from each. Pure, unit-tested in
 * test/bench-metrics/soak-metrics.test.ts.
 */
import { createPrng, shuffled } from '../../algorithms/prng';
import { chaosSchedule, FAULT_KINDS, type FaultKind } from '../../infra/chaos';
import type { CampaignStatus } from '../../schemas/campaign';

/**
 * Faults injected once per soak: a policy server killed and never restarted, a running task-group child
 * terminated, and a deploy of the orchestrator (a new build made current under Worker Versioning).
 */
export const ONE_OFF_FAULTS = ['policy-for-good', 'terminate-child', 'deploy'] as const;
export type OneOffFault = (typeof ONE_OFF_FAULTS)[number];
export type SoakFaultKind = FaultKind | OneOffFault;

export interface SoakPlannedFault {
  kind: SoakFaultKind;
  /** How long a restarted victim stays down (ms); 0 for the one-offs. */
  downMs: number;
}

export const isOneOff = (k: SoakFaultKind): k is OneOffFault => (ONE_OFF_FAULTS as readonly string[]).includes(k);

/**
 * `count` faults: the repeated kinds in `chaosSchedule(seed)` order, with each one-off at a distinct seeded
 * index in [1, oneOffWithin) — early enough that a short validation run sees all three, never first (the
 * campaign must be running before a deploy or a terminate means anything). Deterministic per seed.
 */
export function soakSchedule(
  seed: number,
  count: number,
  opts: { downMs?: { min: number; max: number }; oneOffWithin?: number } = {}
): SoakPlannedFault[] {
  if (!Number.isInteger(count) || count < 0)
    throw new Error(`soakSchedule: count must be an integer ≥ 0, got ${count}`);
  const within = Math.max(ONE_OFF_FAULTS.length + 1, opts.oneOffWithin ?? 9);
  const rng = createPrng(`soak/${seed}`);
  const slots = shuffled(
    Array.from({ length: within - 1 }, (_, i) => i + 1),
    rng
  ).slice(0, ONE_OFF_FAULTS.length);
  const kinds = shuffled(ONE_OFF_FAULTS, rng);
  const oneOffAt = new Map(slots.map((index, i) => [index, kinds[i]!]));
  const repeated = chaosSchedule(seed, Math.ceil(count / FAULT_KINDS.length) + 1, opts.downMs);
  const out: SoakPlannedFault[] = [];
  let next = 0;
  for (let i = 0; i < count; i++) {
    const oneOff = oneOffAt.get(i);
    out.push(oneOff ? { kind: oneOff, downMs: 0 } : repeated[next++]!);
  }
  return out;
}

/** The progress only a working victim allows, measured against the status when the fault hit. */
export interface RecoveryCheck {
  what: string;
  holds: (s: CampaignStatus) => boolean;
}

export function recoveryFor(kind: SoakFaultKind, atFault: CampaignStatus): RecoveryCheck {
  switch (kind) {
    case 'trainer':
      return { what: `trainSteps > ${atFault.trainSteps}`, holds: (s) => s.trainSteps > atFault.trainSteps };
    case 'policy-for-good': {
      // A dead server must not hold up model sync: a newer version reaches a live server.
      const served = Math.max(-1, ...Object.values(atFault.servedVersions));
      const target = Math.max(served, atFault.policyVersion);
      return {
        what: `a policy server serves a version > ${target}`,
        holds: (s) => Object.values(s.servedVersions).some((v) => v > target),
      };
    }
    default:
      return { what: `episodes > ${atFault.episodes}`, holds: (s) => s.episodes > atFault.episodes };
  }
}
