/**
 * Which episodes one evaluation runs (workflows/evaluate.ts, evaluationJobs): greedy on every held-out seed,
 * temperature 1 on the first `sampledEpisodesPerTask` of the same seeds (all of them by default), and greedy
 * only for evaluations started before the temperature-1 patch.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evaluationJobs, heldOutSeeds } from '../../workflows/evaluate';

const tasks = [
  { id: 'click-target', family: 'click-target', seeds: { heldOut: { from: 1000, to: 2000 } } },
  { id: 'click-colour', family: 'click-colour' },
];
const count = (jobs: ReturnType<typeof evaluationJobs>, mode: string, id: string) =>
  jobs.filter((j) => j.mode === mode && j.task.id === id).length;

test('by default temperature 1 runs on every greedy seed', () => {
  const jobs = evaluationJobs({ tasks, episodesPerTask: 8 }, ['greedy', 'sampled']);
  assert.equal(jobs.length, 32);
  for (const t of tasks) {
    assert.equal(count(jobs, 'greedy', t.id), 8);
    assert.equal(count(jobs, 'sampled', t.id), 8);
  }
});

test('sampledEpisodesPerTask runs fewer temperature-1 episodes, on the first of the same seeds', () => {
  const jobs = evaluationJobs({ tasks, episodesPerTask: 64, sampledEpisodesPerTask: 16 }, ['greedy', 'sampled']);
  assert.equal(jobs.length, 2 * 64 + 2 * 16);
  const greedySeeds = heldOutSeeds(tasks[0]!, 64);
  const sampled = jobs.filter((j) => j.mode === 'sampled' && j.task.id === 'click-target');
  assert.deepEqual(
    sampled.map((j) => j.seed),
    greedySeeds.slice(0, 16)
  );
  // Trajectory ids are built from the index within a task and mode: unique per mode.
  assert.deepEqual(
    sampled.map((j) => j.i),
    [...Array(16).keys()]
  );
  assert.equal(count(jobs, 'greedy', 'click-colour'), 64);
  assert.equal(count(jobs, 'sampled', 'click-colour'), 16);
});

test('more sampled than greedy episodes is capped at the greedy seeds; greedy-only evaluations ignore it', () => {
  const capped = evaluationJobs({ tasks, episodesPerTask: 4, sampledEpisodesPerTask: 10 }, ['greedy', 'sampled']);
  assert.equal(count(capped, 'sampled', 'click-target'), 4);
  const greedyOnly = evaluationJobs({ tasks, episodesPerTask: 4, sampledEpisodesPerTask: 2 }, ['greedy']);
  assert.equal(greedyOnly.length, 8);
  assert.ok(greedyOnly.every((j) => j.mode === 'greedy'));
});
