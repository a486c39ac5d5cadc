/**
 * When a trajectory counts as a success: reward ≥ threshold (`campaign.successThreshold`, default 1.0 —
 * OSWorld's published success rate counts a task as solved when its score is 1, so fractional scores
 * such as 0.25 are failures). The raw reward stays in the manifest; only this decision uses the threshold.
 * A missing reward (infrastructure failure) is never a success. Pure and Node-free.
 */

/** Default success threshold (also the config default). */
export const DEFAULT_SUCCESS_THRESHOLD = 1.0;

export function isSuccess(reward: number | null | undefined, threshold: number = DEFAULT_SUCCESS_THRESHOLD): boolean {
  if (!(threshold > 0 && threshold <= 1))
    throw new RangeError(`success threshold must be in (0, 1], got ${String(threshold)} (campaign.successThreshold)`);
  return typeof reward === 'number' && Number.isFinite(reward) && reward >= threshold;
}

/** Fraction of rewards that are successes (0 for none). */
export function successRate(
  rewards: ReadonlyArray<number | null | undefined>,
  threshold = DEFAULT_SUCCESS_THRESHOLD
): number {
  if (rewards.length === 0) return 0;
  return rewards.filter((r) => isSuccess(r, threshold)).length / rewards.length;
}
