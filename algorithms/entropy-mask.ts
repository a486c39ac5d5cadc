/**
 * High-entropy step selection (reference/dart-spec.md §4.5): train only on the top 80 % of step samples
 * by step entropy. Low-entropy steps are ones the policy is already sure about; they carry little
 * learning signal and dominate long GUI trajectories.
 *
 *   k = floor(topFraction × N)   top-k steps → mask 1, the rest → 0
 *
 * Scope: DART's (commented-out) code selects over the whole training batch ('batch', the default); the
 * page does not say, so 'group' (k per group) is offered too. Apply the mask after computing advantages.
 *
 * Ties are broken deterministically: equal entropies keep input order (the earlier sample wins), so the
 * same batch always yields the same mask — needed for an idempotent, retryable train step.
 */
import { InvalidArgumentError, assertFinite, withDefaults } from './common';

export type EntropySelectionScope = 'batch' | 'group';

export interface EntropySelectionOptions {
  /** Fraction of steps kept [§4.5: 0.8, PAGE; entropy_filter=0.8 in an older DART script]. */
  topFraction: number;
  /** Where k is counted [§4.5: 'batch' in DART's code]. */
  scope: EntropySelectionScope;
  /**
   * Never select fewer than this many steps per scope (when it has that many). DART's batches have ≥ 384
   * steps, where floor() never reaches 0; for tiny batches or groups (N = 1 gives floor(0.8) = 0) a
   * floor of 1 keeps a step trainable. Set 0 for the bare formula.
   */
  minSelected: number;
}

export const DEFAULT_ENTROPY_SELECTION_OPTIONS: Readonly<EntropySelectionOptions> = Object.freeze({
  topFraction: 0.8,
  scope: 'batch',
  minSelected: 1,
});

/**
 * k = floor(topFraction × n), with a 1e-9 guard so representation error does not lose a step
 * (0.29 × 100 = 28.999999999999996 in binary floating point), then at least min(minSelected, n).
 */
export function selectionCount(n: number, topFraction: number, minSelected = 1): number {
  const k = Math.floor(topFraction * n + 1e-9);
  return Math.min(n, Math.max(k, Math.min(minSelected, n)));
}

/**
 * 0/1 mask over step samples. `groupIds` (same length as entropies) is required for scope 'group'.
 */
export function highEntropyMask(
  entropies: ArrayLike<number>,
  options?: Partial<EntropySelectionOptions>,
  groupIds?: readonly string[]
): Uint8Array {
  const o = withDefaults<EntropySelectionOptions>(DEFAULT_ENTROPY_SELECTION_OPTIONS, options);
  if (!(o.topFraction > 0 && o.topFraction <= 1)) {
    throw new InvalidArgumentError(`topFraction must be in (0, 1], got ${o.topFraction}`);
  }
  if (!Number.isInteger(o.minSelected) || o.minSelected < 0) {
    throw new InvalidArgumentError(`minSelected must be a non-negative integer, got ${o.minSelected}`);
  }
  const n = entropies.length;
  for (let i = 0; i < n; i++) assertFinite(entropies[i] as number, 'entropy', i);

  // Partition sample indices into the scopes k is counted over.
  let scopes: number[][];
  if (o.scope === 'batch') {
    scopes = [Array.from({ length: n }, (_, i) => i)];
  } else if (o.scope === 'group') {
    if (!groupIds || groupIds.length !== n) {
      throw new InvalidArgumentError(
        `scope 'group' needs one group id per entropy (${n}), got ${groupIds?.length ?? 0}`
      );
    }
    const byGroup = new Map<string, number[]>();
    groupIds.forEach((g, i) => {
      const list = byGroup.get(g);
      if (list) list.push(i);
      else byGroup.set(g, [i]);
    });
    scopes = [...byGroup.values()];
  } else {
    throw new InvalidArgumentError(`scope must be 'batch' or 'group', got ${String(o.scope)}`);
  }

  const mask = new Uint8Array(n);
  for (const indices of scopes) {
    const k = selectionCount(indices.length, o.topFraction, o.minSelected);
    // Highest entropy first; equal entropies by index (stable, deterministic).
    const order = indices.slice().sort((a, b) => (entropies[b] as number) - (entropies[a] as number) || a - b);
    for (let r = 0; r < k; r++) mask[order[r] as number] = 1;
  }
  return mask;
}
