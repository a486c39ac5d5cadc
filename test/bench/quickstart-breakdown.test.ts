/**
 * The quickstart's stop rule (issue 14.3: two consecutive evaluations of ≥ 64 held-out episodes per family,
 * every family at the target) and the summary's breakdown (BC start, RL lift, episodes and time apart).
 * Pure: no servers.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { loadCampaignConfig, parseCampaignConfig } from '../../config/load';
import { PROJECT_ROOT } from '../../infra/settings';
import { breakdownLines, evalLine, quickstartBreakdown } from '../../scripts/lib/quickstart-campaign';
import type { CampaignResult } from '../../workflows/campaign';
import type { EvalPoint } from '../../schemas/campaign';
import { evalMeetsTarget, initialCampaignState, recordEval, shouldStop } from '../../workflows/logic/campaign-state';

const point = (
  version: number,
  perFamily: Record<string, number>,
  perFamilyEpisodes = 64,
  extra: Partial<EvalPoint> = {}
): EvalPoint => {
  const fams = Object.keys(perFamily);
  return {
    version,
    successRate: fams.reduce((a, f) => a + perFamily[f]!, 0) / fams.length,
    episodes: perFamilyEpisodes * fams.length,
    atEpisodes: version * 100,
    atMs: version * 10_000,
    perFamily,
    episodesPerFamily: Object.fromEntries(fams.map((f) => [f, perFamilyEpisodes])),
    ...extra,
  };
};

test('evalMeetsTarget: every family at the target over enough episodes per family', () => {
  assert.equal(evalMeetsTarget(point(1, { a: 0.95, b: 0.91 }), 0.9, 64), true);
  assert.equal(evalMeetsTarget(point(1, { a: 1, b: 0.85 }), 0.9, 64), false, 'one family below');
  assert.equal(evalMeetsTarget(point(1, { a: 0.95, b: 0.95 }, 20), 0.9, 64), false, 'too few episodes');
  // Points without per-family counts (recorded before): episodes split evenly over the families.
  const { episodesPerFamily: _, ...old } = point(1, { a: 0.95, b: 0.95 }, 64);
  assert.equal(evalMeetsTarget(old, 0.9, 64), true);
  assert.equal(evalMeetsTarget(old, 0.9, 65), false);
});

test('shouldStop: the last targetConsecutiveEvals evaluations all meet the target (default 1 as before)', () => {
  const make = (overrides: Record<string, unknown>) => {
    const config = parseCampaignConfig({ campaign: { id: 'stop', targetSuccess: 0.9, ...overrides } });
    const s = initialCampaignState({
      campaignId: 'stop',
      config,
      tasks: [],
      heldOut: [],
      startedAtMs: 0,
      initialVersion: 0,
    });
    return s;
  };
  const one = make({});
  recordEval(one, point(5, { a: 0.95, b: 0.92 }, 20));
  assert.equal(shouldStop(one), true, 'default: one evaluation, any size');

  const two = make({ targetConsecutiveEvals: 2, targetMinEpisodesPerFamily: 64 });
  recordEval(two, point(5, { a: 0.95, b: 0.92 }));
  assert.equal(shouldStop(two), false, 'one good evaluation is not enough');
  recordEval(two, point(10, { a: 0.95, b: 0.88 }));
  assert.equal(shouldStop(two), false, 'the second one dips below');
  recordEval(two, point(15, { a: 0.97, b: 0.9 }));
  assert.equal(shouldStop(two), false, 'only one in a row again');
  recordEval(two, point(20, { a: 1, b: 0.94 }));
  assert.equal(shouldStop(two), true);

  const small = make({ targetConsecutiveEvals: 2, targetMinEpisodesPerFamily: 64 });
  recordEval(small, point(5, { a: 1, b: 1 }, 32));
  recordEval(small, point(10, { a: 1, b: 1 }, 32));
  assert.equal(shouldStop(small), false, 'evaluations of 32 episodes per family do not count');
});

test('configs/quickstart.yaml: a weak BC start, the two-evaluation stop rule over ≥ 64 episodes per family', () => {
  const c = loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml'));
  assert.equal(c.campaign.targetSuccess, 0.9);
  assert.equal(c.campaign.targetConsecutiveEvals, 2);
  assert.ok(c.campaign.targetMinEpisodesPerFamily >= 64);
  assert.ok(c.eval.episodesPerTask >= c.campaign.targetMinEpisodesPerFamily, 'evaluations are big enough to count');
});

/** A finished campaign whose final evaluation is the last of `evals`. */
const campaignResult = (
  evals: EvalPoint[],
  r: Pick<CampaignResult, 'episodes' | 'trainSteps' | 'wallMs'>
): CampaignResult => ({
  campaignId: 'q',
  policyVersion: evals.at(-1)!.version,
  finalEval: evals.at(-1)!,
  evals,
  infraFailures: 0,
  ...r,
});

test('quickstartBreakdown: BC start, RL lift (greedy and temperature 1), episodes and time apart', () => {
  const config = parseCampaignConfig({
    campaign: { id: 'q', targetSuccess: 0.9, targetConsecutiveEvals: 2, targetMinEpisodesPerFamily: 64 },
    policy: { bcWarmStartEpisodes: 32, bcEpochs: 4 },
  });
  const evals = [
    point(0, { a: 0.1, b: 0.2 }, 64, { atMs: 5_000, sampledSuccessRate: 0.1, sampledEpisodes: 128 }),
    point(1, { a: 1, b: 0.25 }, 64, { atMs: 60_000, atEpisodes: 0, sampledSuccessRate: 0.3, sampledEpisodes: 128 }),
    point(6, { a: 1, b: 0.92 }, 64, { atMs: 400_000, sampledSuccessRate: 0.8, sampledEpisodes: 128 }),
    point(11, { a: 1, b: 0.95 }, 64, { atMs: 500_000, sampledSuccessRate: 0.85, sampledEpisodes: 128 }),
  ];
  const b = quickstartBreakdown(config, campaignResult(evals, { episodes: 2000, trainSteps: 11, wallMs: 540_000 }));
  assert.equal(b.bcStart?.version, 1);
  assert.equal(Math.round(b.liftPoints!.greedy), 35); // 62.5 % → 97.5 %
  assert.equal(Math.round(b.liftPoints!.sampled!), 55);
  assert.equal(Math.round(b.liftPoints!.perFamily.b!), 70);
  assert.equal(b.rlTrainSteps, 10);
  assert.equal(b.bcPhaseSeconds, 60);
  assert.equal(b.rlPhaseSeconds, 480);
  assert.equal(b.evalEpisodes, 4 * 256);
  assert.equal(b.targetMet, true);
  const text = breakdownLines(config, b).join('\n');
  assert.match(text, /BC start: .*greedy 63%/);
  assert.match(text, /RL lift: +\+35 points greedy/);
  assert.match(text, /temperature 1/);
  assert.match(text, /stop rule: .*met/);
  assert.match(text, /BC warm start 1\.0 min.*RL 8\.0 min/);
});

test('quickstartBreakdown: a later version evaluated after RL steps never stands in for an unevaluated BC start', () => {
  const config = parseCampaignConfig({ campaign: { id: 'q' }, policy: { bcWarmStartEpisodes: 32, bcEpochs: 4 } });
  const evals = [
    point(0, { a: 0.05, b: 0.03 }, 64, { atMs: 17_000 }),
    point(10, { a: 1, b: 0.36 }, 64, { atMs: 82_000, atEpisodes: 715 }),
    point(85, { a: 1, b: 0.92 }, 64, { atMs: 686_000, atEpisodes: 7_511 }),
  ];
  const b = quickstartBreakdown(config, campaignResult(evals, { episodes: 7_553, trainSteps: 85, wallMs: 690_000 }));
  assert.equal(b.bcStart, null);
  assert.equal(b.liftPoints, null);
  const text = breakdownLines(config, b).join('\n');
  assert.match(text, /BC start: +not evaluated/);
  assert.doesNotMatch(text, /^RL lift:/m);
  assert.equal(b.rlTrainSteps, 84, 'the BC step is not an RL step, evaluated or not');
  assert.equal(b.bcPhaseSeconds, null);
  assert.match(text, /time: +campaign 11\.5 min \(BC and RL phases not timed/);
});

test('evalLine: greedy and temperature 1 side by side, with both episode counts when they differ', () => {
  const same = point(3, { a: 1, b: 0.5 }, 64, {
    sampledSuccessRate: 0.5,
    sampledPerFamily: { a: 0.75, b: 0.25 },
    sampledEpisodes: 128,
  });
  assert.equal(
    evalLine(same),
    'greedy 75% (a 100%, b 50%) | temperature 1: 50% (a 75%, b 25%) [v3, 64 episodes per family]'
  );
  const fewer = point(3, { a: 1, b: 0.5 }, 64, {
    sampledSuccessRate: 0.5,
    sampledPerFamily: { a: 0.75, b: 0.25 },
    sampledEpisodes: 32,
  });
  assert.match(evalLine(fewer), /\[v3, 64 greedy \+ 16 temperature-1 episodes per family\]$/);
});
