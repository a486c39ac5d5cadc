/**
 * Learning-curve benchmark of the trainer (issue 5): the embedded policy learns click-colour from scratch
 * and enter-text from a behaviour-cloning warm start, in one process (bench/lib/local-rl.ts: real
 * Chromium envs, the policy engine, trainStep on MinIO). Writes docs/bench/learning.json and PNG charts
 * (success vs episodes and vs wall time). Run: npm run bench -- learning [--quick]
 * `--ab` runs the issue-14 policy A/B instead (bench/lib/policy-ab.ts → learning-ab.json); `--sweep` the
 * issue-14 trainer sweep (bench/lib/learning-sweep.ts → learning-sweep.json and .md); `--bc-scale` behaviour
 * cloning alone on a suite by demos × epochs (bench/lib/bc-scale.ts → learning-bc-scale.json and .png).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseCampaignConfig } from '../config/load';
import { BrowserEnvPool } from '../envs';
import { loadInfraSettings } from '../infra/settings';
import { ObjectStore } from '../storage/object-store';
import { loadTask } from '../tasks/loader';
import { learningCharts } from './charts';
import { runLocalRl, type LocalRlResult } from './lib/local-rl';
import { benchOutDir, shownPath } from './lib/output';
import { benchLearningSweep } from './lib/learning-sweep';
import { benchBcScale } from './lib/bc-scale';
import { benchPolicyAb } from './lib/policy-ab';

interface Run {
  name: string;
  task: string;
  bcDemos: number;
  maxEpisodes: number;
}

export async function benchLearning(args: string[]): Promise<void> {
  if (args.includes('--ab')) return benchPolicyAb(args);
  if (args.includes('--sweep')) return benchLearningSweep(args);
  if (args.includes('--bc-scale')) return benchBcScale(args);
  const quick = args.includes('--quick');
  // --only <task>: rerun one curve and merge it into the existing docs/bench/learning.json.
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket('dartflow-bench');
  const runs: Run[] = [
    { name: 'click-colour (from scratch)', task: 'click-colour', bcDemos: 0, maxEpisodes: quick ? 2000 : 12_000 },
    { name: 'click-target (from scratch)', task: 'click-target', bcDemos: 0, maxEpisodes: quick ? 2000 : 4000 },
    {
      name: 'enter-text (BC warm start, 1000 demos)',
      task: 'enter-text',
      bcDemos: 1000,
      maxEpisodes: quick ? 2000 : 8000,
    },
  ].filter((r) => !only || r.task === only);
  const trainer = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0, epochs: 2 } }).trainer;
  type Measured = Run & { result: LocalRlResult };
  const outFile = path.join(benchOutDir(), 'learning.json');
  const previous: Measured[] =
    only && fs.existsSync(outFile) ? (JSON.parse(fs.readFileSync(outFile, 'utf8')) as { runs: Measured[] }).runs : [];
  const results: Measured[] = previous.filter((r) => r.task !== only);
  for (const run of runs) {
    const pool = new BrowserEnvPool({ slots: 4, executablePath: settings.chromiumPath });
    try {
      console.log(`[bench learning] ${run.name}`);
      const result = await runLocalRl({
        store,
        pool,
        campaignId: `bench-learning-${run.task}-${Date.now()}`,
        tasks: [loadTask(run.task)],
        trainer,
        groupSize: 8,
        groupsPerStep: 16,
        maxEpisodes: run.maxEpisodes,
        bcDemos: run.bcDemos,
        bcEpochs: 30,
        evalEvery: 3,
        evalEpisodesPerTask: 50,
        target: { success: 0.9, consecutive: 2 },
        log: (l) => console.log(`  ${l}`),
      });
      results.push({ ...run, result });
      console.log(
        `  → ${result.reachedAt ? `90% reached after ${result.reachedAt.episodes} episodes, ${result.reachedAt.seconds.toFixed(0)} s` : `not reached in ${result.episodes} episodes`}`
      );
    } finally {
      await pool.close();
    }
  }
  fs.writeFileSync(
    outFile,
    JSON.stringify(
      { measuredAt: new Date().toISOString(), machine: '2-core x86-64 (shared)', trainer, runs: results },
      null,
      2
    )
  );
  await learningCharts(results, settings.chromiumPath);
  console.log(`[bench learning] wrote ${shownPath(outFile)} and learning-vs-{episodes,time}.png`);
}
