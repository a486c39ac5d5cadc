/**
 * Learning curve of the embedded default (issue 7): the quickstart campaign of `npm start`
 * (configs/quickstart.yaml, through Temporal, every role a local child process; same code:
 * scripts/lib/quickstart-campaign.ts) with a smaller behaviour-cloning warm start (150 oracle demos
 * instead of 400) so RL has something left to do. Writes docs/bench/quickstart.json and
 * quickstart-vs-{episodes,time}.png (held-out greedy success, overall and per family).
 * Run: npm run bench -- quickstart [--bc 150] [section.field=value ...]
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadInfraSettings } from '../infra/settings';
import { writeSvgAsPng } from '../lib/charts';
import { campaignCurveSvg, runQuickstartCampaign } from '../scripts/lib/quickstart-campaign';
import { benchOutDir, shownPath } from './lib/output';

export async function benchQuickstart(args: string[]): Promise<void> {
  const bcAt = args.indexOf('--bc');
  const bc = bcAt >= 0 ? Number(args[bcAt + 1]) : 150;
  const extra = args.filter((a, i) => a.includes('=') && i !== bcAt + 1);
  const overrides = [`policy.bcWarmStartEpisodes=${bc}`, ...extra];
  const settings = loadInfraSettings();
  const started = Date.now();
  console.log(`[bench quickstart] configs/quickstart.yaml with ${overrides.join(' ')}`);
  const { config, result, workflowId } = await runQuickstartCampaign(settings, overrides, {
    idPrefix: 'bench-quickstart',
  });
  const dir = benchOutDir();
  const target = config.campaign.targetSuccess ?? 0.9;
  const reached = result.evals.find(
    (e) => e.successRate >= target && Object.values(e.perFamily).every((v) => v >= target)
  );
  const out = {
    measuredAt: new Date().toISOString(),
    machine: '2-core x86-64 (shared with other work)',
    command: `npm run bench -- quickstart${bcAt >= 0 ? ` --bc ${bc}` : ''}${extra.length ? ` ${extra.join(' ')}` : ''}`,
    overrides,
    campaignId: config.campaign.id,
    workflowId,
    config,
    episodes: result.episodes,
    trainSteps: result.trainSteps,
    campaignWallSeconds: result.wallMs / 1000,
    totalWallSeconds: (Date.now() - started) / 1000,
    infraFailures: result.infraFailures,
    reachedTarget: reached
      ? { version: reached.version, atEpisodes: reached.atEpisodes, atSeconds: reached.atMs / 1000 }
      : null,
    finalEval: result.finalEval,
    evals: result.evals.map((e) => ({
      version: e.version,
      atEpisodes: e.atEpisodes,
      atSeconds: e.atMs / 1000,
      success: e.successRate,
      perFamily: e.perFamily,
      evalEpisodes: e.episodes,
    })),
  };
  fs.writeFileSync(path.join(dir, 'quickstart.json'), JSON.stringify(out, null, 2));
  const title = `quickstart campaign (BC on ${bc} demos, then RL) — held-out greedy success`;
  await writeSvgAsPng(
    campaignCurveSvg(result.evals, 'episodes', title),
    path.join(dir, 'quickstart-vs-episodes.png'),
    settings.chromiumPath
  );
  await writeSvgAsPng(
    campaignCurveSvg(result.evals, 'minutes', title),
    path.join(dir, 'quickstart-vs-time.png'),
    settings.chromiumPath
  );
  for (const e of out.evals)
    console.log(
      `  v${e.version}: ${(e.success * 100).toFixed(0)}% ${JSON.stringify(e.perFamily)} at ${e.atEpisodes} episodes, ${e.atSeconds.toFixed(0)} s`
    );
  console.log(
    `[bench quickstart] ${reached ? `target reached at v${reached.version}, ${reached.atEpisodes} RL episodes, ${(reached.atMs / 1000).toFixed(0)} s` : 'target not reached'}; wrote ${shownPath(path.join(dir, 'quickstart.json'))} and quickstart-vs-{episodes,time}.png`
  );
}
