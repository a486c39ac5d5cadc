/**
 * The ablation benchmark's pure parts (bench/lib/ablation.ts): the six cumulative configurations switch
 * on exactly one DART component each, and the seed statistics (mean ± sd, episodes to a target).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ablationConfigs,
  confidence95,
  episodesToTarget,
  excludesZero,
  formatEffect,
  lowStartFamilies,
  pairedEffect,
  tQuantile975,
  formatEpisodesToTarget,
  formatPct,
  spread,
  summarizeConfig,
  type AblationConfig,
} from '../../bench/lib/ablation';
import { localCampaignConfig } from '../../bench/lib/local-rl';
import { parseCampaignConfig } from '../../config/load';

const switches = (c: AblationConfig) => [
  c.rollout?.dynamicRollout === true,
  c.rollout?.dynamicMaxSteps === true,
  c.trainer.useEntropySelection,
  c.trainer.useTis,
  c.curation?.experiencePool === true,
];

test('the six configurations are cumulative: each adds exactly one DART component', () => {
  const cs = ablationConfigs(2);
  assert.deepEqual(
    cs.map((c) => c.id),
    ['grpo', 'dyn-rollout', 'dyn-length', 'entropy', 'tis', 'pool']
  );
  assert.deepEqual(switches(cs[0]!), [false, false, false, false, false]);
  for (let i = 1; i < cs.length; i++) {
    const on = switches(cs[i]!).filter(Boolean).length;
    assert.equal(on, i, `${cs[i]!.id} has ${i} components on`);
    assert.ok(
      switches(cs[i - 1]!).every((v, k) => !v || switches(cs[i]!)[k]),
      `${cs[i]!.id} keeps what ${cs[i - 1]!.id} had`
    );
  }
  assert.deepEqual(
    cs.map((c) => c.precollectPerTask),
    [0, 0, 0, 0, 0, 2]
  );
});

test('a configuration becomes the campaign config the local loop plans with', () => {
  const trainer = parseCampaignConfig({ trainer: { klBeta: 0 } }).trainer;
  const base = { campaignId: 'abl-x', trainer, groupSize: 8, groupsPerStep: 16 };
  const grpo = localCampaignConfig({ ...base, curation: { rollout: ablationConfigs()[0]!.rollout } });
  assert.equal(grpo.rollout.dynamicRollout, false);
  assert.equal(grpo.rollout.dynamicMaxSteps, false);
  assert.equal(grpo.rollout.nMax, 8);
  assert.equal(grpo.curation.experiencePool, false);
  assert.equal(grpo.trainer.maxGroups, 16);
  assert.equal(grpo.trainer.minGroups, 1);
  const all = ablationConfigs()[5]!;
  const full = localCampaignConfig({ ...base, curation: { rollout: all.rollout, curation: all.curation } });
  assert.equal(full.rollout.dynamicRollout, true);
  assert.equal(full.rollout.dynamicMaxSteps, true);
  assert.equal(full.rollout.successRateThreshold, 0.6);
  assert.equal(full.curation.experiencePool, true);
  // Without curation switches the loop is plain GRPO with fixed groups (the learning benchmark's setting).
  const plain = localCampaignConfig(base);
  assert.equal(plain.rollout.dynamicRollout, false);
  assert.equal(plain.curation.experiencePool, false);
});

test('spread: mean, sample sd, min, max', () => {
  const s = spread([0.5, 0.6, 0.7]);
  assert.ok(Math.abs(s.mean - 0.6) < 1e-12);
  assert.ok(Math.abs(s.sd - 0.1) < 1e-12);
  assert.equal(s.min, 0.5);
  assert.equal(s.max, 0.7);
  assert.equal(s.n, 3);
  assert.equal(spread([0.4]).sd, 0);
  assert.equal(spread([]).n, 0);
  assert.equal(formatPct(s), '60.0 ± 10.0');
});

test('episodes to target: the first evaluation at or above it (optionally held for k evaluations)', () => {
  const curve = [
    { episodes: 0, success: 0.5 },
    { episodes: 512, success: 0.91 },
    { episodes: 1024, success: 0.85 },
    { episodes: 1536, success: 0.92 },
    { episodes: 2048, success: 0.95 },
  ];
  assert.equal(episodesToTarget(curve, 0.9), 512);
  assert.equal(episodesToTarget(curve, 0.9, 2), 1536);
  assert.equal(episodesToTarget(curve, 0.96), null);
  assert.equal(formatEpisodesToTarget([null, null, null], 1024), 'not reached within 1,024');
  assert.equal(formatEpisodesToTarget([512, null, 1536], 2048), '512 / — / 1,536 (2 of 3)');
});

test('summarizeConfig: final success and gain over seeds, per family, mean curve', () => {
  const p = (episodes: number, a: number, b: number) => ({
    episodes,
    seconds: episodes / 10,
    success: (a + b) / 2,
    perTask: { a, b },
  });
  const runs = [
    { configId: 'x', seed: 1, episodes: 1024, seconds: 100, curve: [p(0, 0.4, 0.2), p(1024, 0.8, 0.4)] },
    { configId: 'x', seed: 2, episodes: 1024, seconds: 120, curve: [p(0, 0.4, 0.4), p(1030, 1, 0.6)] },
    { configId: 'y', seed: 1, episodes: 1024, seconds: 90, curve: [p(0, 0, 0), p(1024, 1, 1)] },
  ];
  const s = summarizeConfig('x', runs, 0.9);
  assert.ok(Math.abs(s.final.mean - 0.7) < 1e-12);
  assert.ok(Math.abs(s.gain.mean - 0.35) < 1e-12);
  assert.ok(Math.abs(s.finalPerFamily.a!.mean - 0.9) < 1e-12);
  assert.ok(Math.abs(s.finalPerFamily.b!.mean - 0.5) < 1e-12);
  assert.deepEqual(s.episodesToTarget, [null, null]);
  assert.deepEqual(
    s.meanCurve.map((q) => [q.episodes, Number(q.success.toFixed(12))]),
    [
      [0, 0.35],
      [1027, 0.7],
    ]
  );
  assert.equal(s.seconds.mean, 110);
  assert.deepEqual(summarizeConfig('y', runs, 0.9).episodesToTarget, [1024]);
});

test('confidence95: Student-t interval of the mean over seeds; none for one seed', () => {
  assert.equal(tQuantile975(4), 2.776);
  assert.equal(tQuantile975(100), 1.96);
  assert.throws(() => tQuantile975(0), /df must be an integer ≥ 1/);
  // 5 seeds [0.4, 0.5, 0.6, 0.5, 0.5]: mean 0.5, sample sd √(0.02 / 4) → half-width t(4) · sd / √5.
  const i = confidence95([0.4, 0.5, 0.6, 0.5, 0.5]);
  const half = (2.776 * Math.sqrt(0.02 / 4)) / Math.sqrt(5);
  assert.ok(Math.abs(i.mean - 0.5) < 1e-12);
  assert.ok(Math.abs(i.lo - (0.5 - half)) < 1e-9 && Math.abs(i.hi - (0.5 + half)) < 1e-9);
  assert.ok(Number.isNaN(confidence95([0.3]).lo));
  assert.equal(excludesZero(confidence95([0.3])), false, 'one seed is never "real"');
});

test('pairedEffect: per-seed differences of two configurations, real only when the interval excludes 0', () => {
  const run = (configId: string, seed: number, success: number) => ({
    configId,
    seed,
    curve: [
      { episodes: 0, seconds: 0, success: 0.3, perTask: {} },
      { episodes: 1024, seconds: 1, success, perTask: {} },
    ],
  });
  const final = (r: { curve: Array<{ success: number }> }) => r.curve.at(-1)!.success;
  // A large seed-to-seed spread (0.2 … 0.6) but the same +0.05 on every seed: paired, the effect is real.
  const consistent = [0.2, 0.3, 0.4, 0.5, 0.6].flatMap((b, k) => [
    run('a', k + 1, b),
    run('b', k + 1, b + 0.05 + 0.001 * k),
  ]);
  const e = pairedEffect(consistent, 'a', 'b', final);
  assert.equal(e.n, 5);
  assert.ok(Math.abs(e.mean - 0.052) < 1e-12);
  assert.ok(excludesZero(e));
  assert.match(formatEffect(e), /^\+5\.2 \[\+\d\.\d, \+\d\.\d\] \*\*real\*\*$/);
  // Differences of both signs: not real.
  const mixed = [0.1, -0.1, 0.05, -0.04, 0.02].flatMap((d, k) => [run('a', k + 1, 0.5), run('b', k + 1, 0.5 + d)]);
  assert.equal(excludesZero(pairedEffect(mixed, 'a', 'b', final)), false);
  // Seeds missing one of the two runs are left out, not paired with another seed.
  assert.equal(pairedEffect([run('a', 1, 0.5), run('b', 2, 0.9)], 'a', 'b', final).n, 0);
  assert.equal(formatEffect(pairedEffect([run('a', 1, 0.5), run('b', 2, 0.9)], 'a', 'b', final)), '—');
});

test('lowStartFamilies: families whose BC start averages below the threshold', () => {
  const sp = (mean: number) => ({ mean, sd: 0, min: mean, max: mean, n: 3 });
  assert.deepEqual(
    lowStartFamilies({
      startPerFamily: { 'enter-text': sp(0), 'click-target': sp(1), 'scroll-click': sp(0.05), x: sp(0.1) },
    }),
    ['enter-text', 'scroll-click']
  );
});
