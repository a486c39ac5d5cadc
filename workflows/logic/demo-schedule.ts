/**
 * Which task each demonstration group of the behaviour-cloning warm start goes to (policy.bcTaskWeights).
 * Pure and deterministic: the campaign workflow replays it.
 *
 * Why weights: cloning needs far more demonstrations on some tasks than on others. Measured on the suite
 * (docs/benchmarks.md, "Demonstrations where cloning needs them"): 512 tick-checkboxes demos inside a
 * 4,096-demo mix of eight families clone it to 55–61 % greedy, 2,048 on their own to 92 %, while the other
 * families are at 94–100 % with 512.
 */
import { weightedTurn } from '../../algorithms/curation';

/**
 * Task index of each of `groups` demonstration groups. Without weights (or all equal) it is plain round
 * robin, i mod n — the order every campaign had before weights existed, so their histories replay. With
 * weights it is smooth weighted round robin: over any window each task's share of groups tracks
 * weight / Σ weights, and the tasks stay interleaved (a stop mid-way leaves a balanced set). Tasks not
 * named weigh 1.
 */
export function demoTaskOrder(
  taskIds: readonly string[],
  weights: Readonly<Record<string, number>>,
  groups: number
): number[] {
  const n = taskIds.length;
  if (n === 0) return [];
  const w = taskIds.map((id) => weights[id] ?? 1);
  if (w.every((x) => x === w[0])) return Array.from({ length: groups }, (_, i) => i % n);
  let credits = new Array<number>(n).fill(0);
  const order: number[] = [];
  for (let g = 0; g < groups; g++) {
    const turn = weightedTurn(credits, w);
    credits = turn.credits;
    order.push(turn.pick);
  }
  return order;
}

/** Keys of policy.bcTaskWeights that name no task of the suite (a typo would silently weigh nothing). */
export function unknownWeightedTasks(
  taskIds: readonly string[],
  // Absent in configs sent by workers from before the field (a rolling deploy): nothing to check.
  weights: Readonly<Record<string, number>> | undefined
): string[] {
  const known = new Set(taskIds);
  return Object.keys(weights ?? {}).filter((id) => !known.has(id));
}
