import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DEFS_DIR,
  TASK_FAMILIES,
  TaskConfigError,
  listSuites,
  loadSuite,
  loadTask,
  loadTaskFile,
  seedInSplit,
  seedsFor,
} from '../../tasks';

test('suites tier1, tier2, all and quickstart load and cover every family', () => {
  assert.deepEqual(listSuites(), ['all', 'miniwob', 'miniwob-easy', 'quickstart', 'tier1', 'tier2']);
  const all = loadSuite('all');
  assert.deepEqual(new Set(all.taskSpecs.map((t) => t.family)), new Set(TASK_FAMILIES));
  assert.ok(loadSuite('tier1').taskSpecs.every((t) => t.tier === 1));
  assert.ok(loadSuite('tier2').taskSpecs.every((t) => t.tier === 2));
  assert.deepEqual(loadSuite('quickstart').tasks, ['click-target', 'click-colour']);
});

test('task files are a superset of OSWorld task JSON with disjoint train / held-out seeds', () => {
  for (const t of loadSuite('all').taskSpecs) {
    for (const k of ['id', 'instruction', 'config', 'evaluator', 'related_apps', 'snapshot', 'source'])
      assert.ok(k in t, `${t.id} lacks ${k}`);
    const train = seedsFor(t, 'train', 5);
    const held = seedsFor(t, 'heldOut', 5);
    assert.equal(train.length, 5);
    assert.ok(train.every((s) => seedInSplit(t, 'train', s) && !seedInSplit(t, 'heldOut', s)));
    assert.ok(held.every((s) => seedInSplit(t, 'heldOut', s) && !seedInSplit(t, 'train', s)));
  }
});

function writeTask(dir: string, name: string, mutate: (t: Record<string, unknown>) => void): string {
  const t = JSON.parse(fs.readFileSync(path.join(DEFS_DIR, 'click-target.json'), 'utf8')) as Record<string, unknown>;
  t.id = name;
  mutate(t);
  const file = path.join(dir, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(t));
  return file;
}

test('a malformed task file fails with a message naming the file and the field', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-tasks-'));
  try {
    const cases: [string, (t: Record<string, unknown>) => void, string][] = [
      ['bad-steps', (t) => (t.maxSteps = 0), 'maxSteps'],
      ['bad-family', (t) => (t.family = 'fly-to-moon'), 'family'],
      ['no-evaluator', (t) => delete t.evaluator, 'evaluator'],
      ['bad-tier', (t) => (t.tier = 2), 'tier'],
      ['overlap', (t) => (t.seeds = { train: { from: 0, to: 100 }, heldOut: { from: 50, to: 200 } }), 'seeds.heldOut'],
      ['bad-range', (t) => (t.seeds = { train: { from: 10, to: 5 }, heldOut: { from: 50, to: 200 } }), 'seeds.train'],
    ];
    for (const [name, mutate, field] of cases) {
      const file = writeTask(dir, name, mutate);
      assert.throws(
        () => loadTaskFile(file),
        (err: unknown) => {
          assert.ok(err instanceof TaskConfigError, String(err));
          assert.ok(err.message.includes(file), err.message);
          assert.ok(err.message.includes(`field "${field}`), err.message);
          assert.equal(err.file, file);
          return true;
        }
      );
    }
    const notJson = path.join(dir, 'broken.json');
    fs.writeFileSync(notJson, '{ "id": ');
    assert.throws(
      () => loadTaskFile(notJson),
      (err: unknown) => err instanceof TaskConfigError && err.message.includes(notJson)
    );
    const wrongName = writeTask(dir, 'name-a', (t) => (t.id = 'name-b'));
    assert.throws(() => loadTaskFile(wrongName), /field "id"/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('unknown task ids and suites are TaskConfigErrors', () => {
  assert.throws(() => loadTask('../etc/passwd'), TaskConfigError);
  assert.throws(() => loadTask('no-such-task'), TaskConfigError);
  assert.throws(() => loadSuite('no-such-suite'), /unknown suite/);
});
