import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ConfigError, loadCampaignConfig, parseCampaignConfig } from '../../config/load';
import { CONFIG_SECTIONS } from '../../schemas/config';

test("defaults are DART's constants (dart-spec §4, §6)", () => {
  const cfg = parseCampaignConfig({});
  assert.equal(cfg.trainer.clipLow, 0.1);
  assert.equal(cfg.trainer.clipHigh, 0.28);
  assert.equal(cfg.trainer.dualClip, 10);
  assert.equal(cfg.trainer.tisCap, 1);
  assert.equal(cfg.trainer.klBeta, 0.1);
  assert.equal(cfg.trainer.entropyTopFraction, 0.8);
  assert.equal(cfg.trainer.entropyCoef, 0);
  assert.equal(cfg.rollout.nMax, 8);
  assert.equal(cfg.rollout.nMin, 1);
  assert.equal(cfg.rollout.successRateThreshold, 0.6);
  assert.equal(cfg.rollout.maxSteps, 30);
  assert.equal(cfg.curation.maxStaleness, 1);
  assert.equal(cfg.curation.groupSize, 8);
  assert.equal(cfg.campaign.mode, 'async');
});

test('every config field has a description', () => {
  const missing: string[] = [];
  let fields = 0;
  for (const [section, schema] of Object.entries(CONFIG_SECTIONS)) {
    assert.ok(schema.description, `section ${section} has a description`);
    for (const [field, f] of Object.entries(schema.shape as Record<string, { description?: string }>)) {
      fields++;
      if (!f.description) missing.push(`${section}.${field}`);
    }
  }
  assert.deepEqual(missing, []);
  assert.ok(fields > 40, `expected the full config, saw ${fields} fields`);
  // Every section appears in the top-level schema.
  assert.deepEqual(Object.keys(parseCampaignConfig({})).sort(), Object.keys(CONFIG_SECTIONS).sort());
});

test('a bad value is reported with field path, bad value and what is allowed', () => {
  assert.throws(
    () => parseCampaignConfig({ trainer: { clipLow: -0.5 } }, 'my.yaml'),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /Invalid campaign config \(my\.yaml\)/);
      assert.match(err.message, /trainer\.clipLow: got -0\.5; .*>=0 — PPO ε_low/);
      return true;
    }
  );
  assert.throws(
    () => parseCampaignConfig({ trainer: { lerningRate: 1 } }),
    /unknown field\(s\) "trainer\.lerningRate"/
  );
  assert.throws(
    () => parseCampaignConfig({ campaign: { mode: 'batch' } }),
    /campaign\.mode: got "batch"; .*"async"\|"sync"/
  );
  assert.throws(
    () => parseCampaignConfig({ rollout: { nMin: 9 } }),
    /rollout\.nMin: got 9; must be ≤ rollout\.nMax \(8\)/
  );
  // A VLM campaign uses the registered vLLM roles: policy.vlmEndpoint is no longer required (deprecated).
  assert.equal(parseCampaignConfig({ policy: { kind: 'vlm' } }).policy.vlmEndpoint, undefined);
  const vlm = parseCampaignConfig({
    policy: {
      kind: 'vlm',
      options: { maxTokens: 8, logitBias: { '151655': -100 }, minPixels: 3136, coordModel: 'ui-tars' },
    },
  });
  assert.deepEqual(vlm.policy.options, {
    maxTokens: 8,
    logitBias: { '151655': -100 },
    minPixels: 3136,
    coordModel: 'ui-tars',
  });
  assert.throws(
    () => parseCampaignConfig({ policy: { options: { maxTokens: 8 } } }),
    /policy\.options: .*policy\.kind is "vlm"/
  );
  assert.throws(
    () => parseCampaignConfig({ policy: { kind: 'vlm', options: { minPixels: 5000, maxPixels: 4000 } } }),
    /policy\.options\.minPixels: .*must be ≤ maxPixels/
  );
  assert.throws(
    () => parseCampaignConfig({ policy: { kind: 'vlm', options: { logitBias: { im_end: -100 } } } }),
    /policy\.options\.logitBias/
  );
  assert.throws(
    () => parseCampaignConfig({ policy: { kind: 'vlm', options: { maxTokenz: 8 } } }),
    /policy\.options\.maxTokenz/
  );
  // The VLM trainer makes one update per step: targetKl would be ignored there, so it is refused up front.
  assert.throws(
    () => parseCampaignConfig({ policy: { kind: 'vlm' }, trainer: { targetKl: 0.05 } }),
    /trainer\.targetKl.*set trainer\.targetKl: null/
  );
  assert.equal(parseCampaignConfig({ trainer: { targetKl: 0.05 } }).trainer.targetKl, 0.05);
  // Signal-weighted turns already thin out solved tasks; the round-robin skip rule on top is refused.
  assert.throws(
    () => parseCampaignConfig({ rollout: { taskTurns: 'signal', solvedTaskEvery: 4 } }),
    /rollout\.solvedTaskEvery: .*set rollout\.solvedTaskEvery: 1 or rollout\.taskTurns: round-robin/
  );
  assert.throws(() => parseCampaignConfig({ rollout: { taskTurns: 'weighted' } }), /rollout\.taskTurns/);
  assert.equal(parseCampaignConfig({ rollout: { taskTurns: 'signal' } }).rollout.taskTurns, 'signal');
  assert.equal(parseCampaignConfig({}).rollout.taskTurns, 'round-robin', "DART's round robin by default");
  assert.throws(() => parseCampaignConfig({ campaign: { id: '../etc' } }), /campaign\.id: got "\.\.\/etc"/);
});

test('YAML and JSON files load, overrides win, and broken files name the file', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-cfg-'));
  const yamlFile = path.join(dir, 'c.yaml');
  fs.writeFileSync(yamlFile, 'campaign:\n  id: exp-1\ntrainer:\n  learningRate: 0.001\n');
  const cfg = loadCampaignConfig(yamlFile, ['trainer.klBeta=0', 'rollout.dynamicRollout=false']);
  assert.equal(cfg.campaign.id, 'exp-1');
  assert.equal(cfg.trainer.learningRate, 0.001);
  assert.equal(cfg.trainer.klBeta, 0);
  assert.equal(cfg.rollout.dynamicRollout, false);
  const jsonFile = path.join(dir, 'c.json');
  fs.writeFileSync(jsonFile, '{"campaign": {"suite": "tier1"}}');
  assert.equal(loadCampaignConfig(jsonFile).campaign.suite, 'tier1');
  fs.writeFileSync(jsonFile, '{"campaign": ');
  assert.throws(() => loadCampaignConfig(jsonFile), new RegExp(`${jsonFile.replace(/[.]/g, '\\.')} is not valid JSON`));
  assert.throws(() => loadCampaignConfig(path.join(dir, 'missing.yaml')), /Cannot read config file/);
  assert.throws(() => loadCampaignConfig(yamlFile, ['noequals']), /expected field\.path=value/);
  assert.throws(() => loadCampaignConfig(yamlFile, ['trainer.learningRate=fast']), /trainer\.learningRate: got "fast"/);
  fs.rmSync(dir, { recursive: true });
});
