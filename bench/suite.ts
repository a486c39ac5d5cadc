/**
 * The whole suite (issue 14.4): one campaign on `all` (the 4 tier-1 and 4 tier-2 families) through Temporal,
 * every role a local child process (the quickstart's runner, scripts/lib/quickstart-campaign.ts), for
 * --minutes of campaign time. Goal: held-out greedy success ≥ 90 % on every tier-1 family and ≥ 80 % on
 * every tier-2 family in one evaluation within the window (bench/lib/suite-goals.ts). The campaign runs the
 * whole window (its own stop rule asks for 100 %), so the curves show what comes after the goal too.
 *
 * Config: configs/quickstart.yaml with suite `all`, a behaviour-cloning start of --bc oracle demos over all
 * eight families (--bc-epochs; default 6144 × 16, a strong start: `npm run bench -- learning --bc-scale`),
 * five shares of them for tick-checkboxes and one for each other family (policy.bcTaskWeights: 2,560 and 512
 * demos; in an even 4,096-demo mix tick-checkboxes cloned to 55–61 %, alone from 2,048 to 92 %),
 * the demonstration anchor on RL steps (trainer.demoAnchorCoef 1: without it RL erodes the families it
 * no longer trains on), a step budget for the multi-step tier-2 tasks (rollout.maxSteps 12), evaluations of
 * 32 greedy + 8 temperature-1 held-out episodes per family every 10 versions; any `section.field=value`
 * after the options overrides it (e.g. trainer.demoAnchorCoef=0 for DART's loss alone).
 *
 * Writes suite.json (per family: BC start, final greedy and temperature 1, best, first time at its goal; the
 * suite's first evaluation meeting every goal; every evaluation) and suite-tier{1,2}-vs-{time,episodes}.png
 * (per-family curves with the tier's goal line and the RL start) to the bench output directory (docs/bench
 * with --publish).
 * Run: npm run bench -- suite [--minutes 60] [--bc 6144] [--bc-epochs 16] [section.field=value ...]
 * (policy.bcTaskWeights={} spends the demos evenly)
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings } from '../infra/settings';
import { writeSvgAsPng } from '../lib/charts';
import type { EvalPoint } from '../schemas/campaign';
import { loadSuite } from '../tasks/loader';
import {
  bcStartEval,
  breakdownLines,
  campaignCurveSvg,
  campaignRunRecord,
  evalPointRecord,
  quickstartBreakdown,
  runQuickstartCampaign,
} from '../scripts/lib/quickstart-campaign';
import { benchOutDir, shownPath } from './lib/output';
import { familyGoals, restrictFamilies, suiteGoalReport, TIER_GOALS, type Tier } from './lib/suite-goals';

function positiveInt(flag: string, raw: string | undefined, dflt: number): number {
  const v = raw === undefined ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${flag} must be a positive integer, got ${raw}`);
  return v;
}

export async function benchSuite(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv.filter((a) => a !== '--publish'),
    allowPositionals: true,
    options: {
      minutes: { type: 'string' },
      bc: { type: 'string' },
      'bc-epochs': { type: 'string' },
    },
  });
  const bad = positionals.find((p) => !p.includes('='));
  if (bad)
    throw new Error(
      `unknown argument ${JSON.stringify(bad)}: options are --minutes, --bc, --bc-epochs, overrides section.field=value`
    );
  const minutes = positiveInt('minutes', values.minutes, 60);
  const bc = positiveInt('bc', values.bc, 6144);
  const bcEpochs = positiveInt('bc-epochs', values['bc-epochs'], 16);
  const overrides = [
    'campaign.suite=all',
    // The task turns and rewards its published runs had (the quickstart's signal turns and step discount came later).
    'rollout.taskTurns=round-robin',
    'rollout.solvedTaskEvery=4',
    'curation.stepDiscount=1',
    // … and the network (the quickstart's hue channels came later too).
    'policy.hueInput=false',
    `campaign.maxMinutes=${minutes}`,
    'campaign.maxTrainSteps=1000000',
    // Run the whole window: the goal differs per tier, the campaign's stop rule has one target for all.
    'campaign.targetSuccess=1',
    'campaign.targetMinEpisodesPerFamily=32',
    'rollout.maxSteps=12',
    `policy.bcWarmStartEpisodes=${bc}`,
    `policy.bcEpochs=${bcEpochs}`,
    // Demonstrations where cloning needs them (docs/benchmarks.md, "Demonstrations where cloning needs them").
    'policy.bcTaskWeights.tick-checkboxes=5',
    'eval.episodesPerTask=32',
    'eval.sampledEpisodesPerTask=8',
    'eval.everyVersions=10',
    'eval.gateEveryVersions=10',
    'trainer.demoAnchorCoef=1',
    ...positionals,
  ];
  const tiers: Record<Tier, string[]> = { tier1: loadSuite('tier1').tasks, tier2: loadSuite('tier2').tasks };
  const goals = familyGoals(tiers);
  const settings = loadInfraSettings();
  const started = Date.now();
  console.log(`[bench suite] configs/quickstart.yaml with ${overrides.join(' ')}`);
  const run = await runQuickstartCampaign(settings, overrides, { idPrefix: 'bench-suite' });
  const { config, result } = run;
  const evals = result.evals as EvalPoint[];
  const rlStart = bcStartEval(config, evals);
  const breakdown = quickstartBreakdown(config, result);
  const report = suiteGoalReport(evals, goals, {
    windowMs: minutes * 60_000,
    ...(rlStart ? { bcStart: rlStart } : {}),
    final: (result.finalEval as EvalPoint | null) ?? null,
  });
  const dir = benchOutDir();
  const out = {
    measuredAt: new Date().toISOString(),
    command: `npm run bench -- suite ${argv.filter((a) => a !== '--publish').join(' ')}`.trim(),
    goal: `held-out greedy success ≥ ${TIER_GOALS.tier1 * 100} % on every tier-1 family (${tiers.tier1.join(', ')}) and ≥ ${TIER_GOALS.tier2 * 100} % on every tier-2 family (${tiers.tier2.join(', ')}) in one evaluation within ${minutes} minutes`,
    overrides,
    ...campaignRunRecord(run, started),
    breakdown,
    report,
    evals: evals.map(evalPointRecord),
  };
  // The result first: a chart that fails to render must not lose the hour's measurement.
  const jsonFile = path.join(dir, 'suite.json');
  fs.writeFileSync(jsonFile, JSON.stringify(out, null, 2));
  for (const tier of Object.keys(tiers) as Tier[]) {
    const tierEvals = evals.map((e) => restrictFamilies(e, tiers[tier]));
    const tierStart = rlStart ? restrictFamilies(rlStart, tiers[tier]) : undefined;
    for (const x of ['minutes', 'episodes'] as const) {
      const title = `suite \`all\`, ${tier} families (goal ≥ ${TIER_GOALS[tier] * 100} % each): held-out success`;
      await writeSvgAsPng(
        campaignCurveSvg(tierEvals, x, title, tierStart, TIER_GOALS[tier]),
        path.join(dir, `suite-${tier}-vs-${x === 'minutes' ? 'time' : 'episodes'}.png`),
        settings.chromiumPath
      );
    }
  }
  const pct = (v: number | null) => (v === null ? '–' : `${Math.round(v * 100)}%`);
  for (const [f, o] of Object.entries(report.perFamily))
    console.log(
      `  ${o.tier} ${f}: BC ${pct(o.bcStart)} → final greedy ${pct(o.final)} (T=1 ${pct(o.finalSampled)}), best ${pct(o.best)}; goal ${pct(o.goal)} ${o.firstReached ? `first reached at v${o.firstReached.version}, ${o.firstReached.atMinutes.toFixed(1)} min` : 'NOT reached'}`
    );
  for (const line of breakdownLines(config, breakdown)) console.log(line);
  console.log(
    `[bench suite] goal ${report.met ? `met at v${report.firstAllMet!.version}, ${report.firstAllMet!.atMinutes.toFixed(1)} min` : 'NOT met'} (final: tier-1 ${report.finalMetCount.tier1.met}/${report.finalMetCount.tier1.of}, tier-2 ${report.finalMetCount.tier2.met}/${report.finalMetCount.tier2.of} at their goal); wrote ${shownPath(jsonFile)} and suite-tier{1,2}-vs-{time,episodes}.png`
  );
}
