/**
 * Learning curve of the embedded default (issues 7 and 14): exactly the quickstart campaign of `npm start`
 * (configs/quickstart.yaml, through Temporal, every role a local child process; same code:
 * scripts/lib/quickstart-campaign.ts), which starts from a deliberately weak behaviour-cloning warm start so
 * RL does the work. Writes quickstart.json (BC start, RL lift, episodes and time apart; every evaluation
 * greedy and temperature 1) and quickstart-vs-{episodes,time}.png (RL start marked) to the bench output
 * directory (docs/bench with --publish).
 * Run: npm run bench -- quickstart [--bc N] [section.field=value ...]
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadInfraSettings } from '../infra/settings';
import type { EvalPoint } from '../schemas/campaign';
import { writeSvgAsPng } from '../lib/charts';
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

export async function benchQuickstart(args: string[]): Promise<void> {
  const bcAt = args.indexOf('--bc');
  const extra = args.filter((a, i) => a.includes('=') && i !== bcAt + 1);
  const overrides = [...(bcAt >= 0 ? [`policy.bcWarmStartEpisodes=${Number(args[bcAt + 1])}`] : []), ...extra];
  const settings = loadInfraSettings();
  const started = Date.now();
  console.log(`[bench quickstart] configs/quickstart.yaml${overrides.length ? ` with ${overrides.join(' ')}` : ''}`);
  const run = await runQuickstartCampaign(settings, overrides, { idPrefix: 'bench-quickstart' });
  const { config, result } = run;
  const dir = benchOutDir();
  const target = config.campaign.targetSuccess ?? 0.9;
  const reached = result.evals.find(
    (e) => e.successRate >= target && Object.values(e.perFamily).every((v) => v >= target)
  );
  const out = {
    measuredAt: new Date().toISOString(),
    command: `npm run bench -- quickstart${bcAt >= 0 ? ` --bc ${args[bcAt + 1]}` : ''}${extra.length ? ` ${extra.join(' ')}` : ''}`,
    overrides,
    ...campaignRunRecord(run, started),
    breakdown: quickstartBreakdown(config, result),
    reachedTarget: reached
      ? { version: reached.version, atEpisodes: reached.atEpisodes, atSeconds: reached.atMs / 1000 }
      : null,
    finalEval: result.finalEval,
    evals: (result.evals as EvalPoint[]).map(evalPointRecord),
  };
  fs.writeFileSync(path.join(dir, 'quickstart.json'), JSON.stringify(out, null, 2));
  const title = `quickstart campaign (BC on ${config.policy.bcWarmStartEpisodes} demos, then RL) — held-out success`;
  const rlStart = bcStartEval(config, result.evals);
  await writeSvgAsPng(
    campaignCurveSvg(result.evals, 'episodes', title, rlStart),
    path.join(dir, 'quickstart-vs-episodes.png'),
    settings.chromiumPath
  );
  await writeSvgAsPng(
    campaignCurveSvg(result.evals, 'minutes', title, rlStart),
    path.join(dir, 'quickstart-vs-time.png'),
    settings.chromiumPath
  );
  for (const e of out.evals)
    console.log(
      `  v${e.version}: greedy ${(e.success * 100).toFixed(0)}% ${JSON.stringify(e.perFamily)}, T=1 ${e.sampledSuccess === null ? '–' : `${(e.sampledSuccess * 100).toFixed(0)}%`} at ${e.atEpisodes} episodes, ${e.atSeconds.toFixed(0)} s`
    );
  for (const line of breakdownLines(config, out.breakdown)) console.log(line);
  console.log(
    `[bench quickstart] ${reached ? `target reached at v${reached.version}, ${reached.atEpisodes} RL episodes, ${(reached.atMs / 1000).toFixed(0)} s` : 'target not reached'}; wrote ${shownPath(path.join(dir, 'quickstart.json'))} and quickstart-vs-{episodes,time}.png`
  );
}
