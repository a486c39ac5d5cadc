import { test } from 'node:test';
import assert from 'node:assert/strict';
import { demoTaskOrder, unknownWeightedTasks } from '../../workflows/logic/demo-schedule';

const TASKS = ['click-target', 'click-colour', 'tick-checkboxes', 'pick-menu'];

const counts = (order: number[]): number[] => TASKS.map((_, i) => order.filter((x) => x === i).length);

test('without weights (or all equal) the warm start keeps its round robin, so older histories replay', () => {
  const plain = Array.from({ length: 11 }, (_, i) => i % TASKS.length);
  assert.deepEqual(demoTaskOrder(TASKS, {}, 11), plain);
  assert.deepEqual(
    demoTaskOrder(TASKS, { 'click-target': 3, 'click-colour': 3, 'tick-checkboxes': 3, 'pick-menu': 3 }, 11),
    plain
  );
  assert.deepEqual(demoTaskOrder([], { x: 2 }, 5), []);
});

test('weights set each task’s share of groups, interleaved, with unnamed tasks at 1', () => {
  const weights = { 'tick-checkboxes': 5 };
  // Σ = 8: every 8 consecutive groups hold exactly 5 tick-checkboxes groups and 1 of each other task.
  const order = demoTaskOrder(TASKS, weights, 64);
  for (let start = 0; start < 64; start += 8) assert.deepEqual(counts(order.slice(start, start + 8)), [1, 1, 5, 1]);
  // Interleaved: never more than 2 tick-checkboxes groups in a row, so a stop mid-way leaves every task some demos.
  const longestRun = Math.max(
    ...order
      .join('')
      .split(/[^2]/)
      .map((r) => r.length)
  );
  assert.ok(longestRun <= 2, `runs of ${longestRun}`);
  // Deterministic (the workflow replays it) and any group count works.
  assert.deepEqual(demoTaskOrder(TASKS, weights, 64), order);
  assert.deepEqual(counts(demoTaskOrder(TASKS, { 'click-target': 0.5 }, 7)), [1, 2, 2, 2]);
});

test('names that are no task of the suite are reported (prepareCampaign refuses them)', () => {
  assert.deepEqual(unknownWeightedTasks(TASKS, { 'tick-checkboxes': 2, 'tick-checkbox': 3 }), ['tick-checkbox']);
  assert.deepEqual(unknownWeightedTasks(TASKS, {}), []);
  assert.deepEqual(unknownWeightedTasks(TASKS, undefined), []);
});
