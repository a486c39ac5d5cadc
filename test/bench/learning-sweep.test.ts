/**
 * The issue-14 sweep's settings (bench/lib/learning-sweep.ts): each must change what an RL step does. The
 * quickstart sets `rlLearningRate` apart from the cloning rate, so a learning-rate setting that changed only
 * `learningRate` would run the base again under another name.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { loadCampaignConfig } from '../../config/load';
import { PROJECT_ROOT } from '../../infra/settings';
import { SWEEP_SETTINGS, sweepTrainer } from '../../bench/lib/learning-sweep';

const quickstart = loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml')).trainer;
/** The learning rate the RL update uses (activities/trainer/grpo-update.ts). */
const rlRate = (t: typeof quickstart) => t.rlLearningRate ?? t.learningRate;

test('the sweep base is the quickstart trainer as configured', () => {
  assert.deepEqual(sweepTrainer(quickstart, 'base'), quickstart);
});

test('every setting changes a field of the RL update, and a learning-rate setting changes the RL rate', () => {
  const base = sweepTrainer(quickstart, 'base');
  for (const name of Object.keys(SWEEP_SETTINGS).filter((n) => n !== 'base')) {
    const t = sweepTrainer(quickstart, name);
    const changed = (Object.keys(t) as Array<keyof typeof t>).filter((k) => t[k] !== base[k]);
    assert.ok(changed.length > 0, `${name} runs the base again`);
    if (name.startsWith('lr-')) assert.notEqual(rlRate(t), rlRate(base), `${name} leaves the RL learning rate`);
  }
  assert.equal(rlRate(sweepTrainer(quickstart, 'lr-3e-3')), 3e-3);
  assert.throws(() => sweepTrainer(quickstart, 'lr-1e-3'), /unknown sweep setting lr-1e-3: one of base, lr-3e-3/);
});
