/**
 * DART-style ablation (issue 7) on the tier-1 + tier-2 suite (all 8 task families): six cumulative
 * configurations — GRPO baseline, + dynamic rollout number (§4.6), + dynamic trajectory length (§4.7),
 * + high-entropy steps (§4.5), + truncated IS (§4.4), + experience pool (§4.8) — × N seeds. Each seed
 * behaviour-clones once on a few oracle demos (DART's RL starts from an SFT model); its six runs all start
 * from that checkpoint and get the same RL episode budget. Everything runs in bench/lib/local-rl.ts with
 * the campaign's own planning and curation functions and the trainer's runTrainStep.
 * Writes docs/bench/ablation.json and ablation-{final,per-family,curves}.png.
 * Run: npm run bench -- ablation [--quick] [--seeds 3] [--episodes 1024] [--groups 8] [--bc 400] [--eval 16]
 *      [--final-eval 32] [--eval-every 512]   (--report: tables and charts from the JSON, no rerun) [--configs grpo,pool] [--suite all]
 *      [--name ablation-pool]   (output base name: <name>.json and <name>-*.png; default ablation)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCampaignConfig, readConfigFile } from '../config/load';
import { BrowserEnvPool } from '../envs';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { barChartSvg, lineChartSvg, writeSvgAsPng } from '../lib/charts';
import type { TrajectorySummary } from '../schemas/campaign';
import { ObjectStore } from '../storage/object-store';
import { loadSuite } from '../tasks/loader';
import {
  ablationConfigs,
  formatEpisodesToTarget,
  formatPct,
  summarizeConfig,
  type AblationRunLike,
  spread,
  formatEffect,
  intervalOf,
  lowStartFamilies,
  pairedEffect,
  type ConfigSummary,
  type Interval,
} from './lib/ablation';
import { runLocalRl, type LocalRlResult } from './lib/local-rl';
import { benchOutDir } from './lib/output';

const TARGET = 0.9;

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

/** Base name of the JSON and charts: `--name <name>` (e.g. a second ablation beside the published one), else ablation[-quick]. */
function outputName(args: string[], quick: boolean): string {
  const i = args.indexOf('--name');
  if (i < 0) return quick ? 'ablation-quick' : 'ablation';
  const name = args[i + 1] ?? '';
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new Error(`--name ${name}: use lower-case letters, digits and dashes`);
  return name;
}

/** The first k successful demos of each task: the pre-collected successes of the pool (§4.8). */
function precollectedFrom(demos: TrajectorySummary[], perTask: number): TrajectorySummary[] {
  const out: TrajectorySummary[] = [];
  const count = new Map<string, number>();
  for (const d of demos) {
    if ((count.get(d.taskId) ?? 0) >= perTask) continue;
    count.set(d.taskId, (count.get(d.taskId) ?? 0) + 1);
    out.push(d);
  }
  return out;
}

interface AblationJson {
  settings: { seeds: number; rlEpisodesPerRun: number; families: string[] };
  configs: Array<{ id: string; label: string }>;
  runs: Array<AblationRunLike & { stats: LocalRlResult['stats'] }>;
}

/** Markdown tables of an ablation result: overall with 95 % intervals, per family, the pool on near-0 % families, rollouts. */
export function ablationMarkdown(data: AblationJson, summary: ConfigSummary[]): string {
  const { configs, runs, settings } = data;
  const families = settings.families;
  const pct = (v: number) => (Number.isFinite(v) ? (v * 100).toFixed(1) : '—');
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  const ci = (i: Interval) => (i.n >= 2 ? `${pct(i.mean)} [${pct(i.lo)}, ${pct(i.hi)}]` : pct(i.mean));
  const final = (r: AblationRunLike) => r.curve.at(-1)!.success;
  const finalOf = (f: string) => (r: AblationRunLike) => r.curve.at(-1)!.perTask[f] ?? 0;
  const lines = [
    `Greedy success in %; [a, b] = 95 % confidence interval of the mean over ${settings.seeds} seeds (Student's t). "Paired" effects take each seed's two runs (same BC start) and difference them; **real** = the interval excludes 0.`,
    '',
    `| # | configuration | final greedy % [95 % CI] | final T=1 % | change vs BC start, pp [95 % CI] | this component (paired vs the row above), pp | vs GRPO baseline (paired), pp | episodes to 90 % |`,
    `|---|---|---|---|---|---|---|---|`,
    `| 0 | BC warm start (start of every run) | ${ci(intervalOf(summary[0]!.start))} | | | | | |`,
    ...configs.map((c, i) => {
      const s = summary[i]!;
      const own = i === 0 ? '—' : formatEffect(pairedEffect(runs, configs[i - 1]!.id, c.id, final));
      const vsBase = i === 0 ? '—' : formatEffect(pairedEffect(runs, configs[0]!.id, c.id, final));
      return `| ${i + 1} | ${c.label} | ${ci(intervalOf(s.final))} | ${s.finalSampled.n ? pct(s.finalSampled.mean) : '—'} | ${formatEffect(intervalOf(s.gain))} | ${own} | ${vsBase} | ${formatEpisodesToTarget(s.episodesToTarget, settings.rlEpisodesPerRun)} |`;
    }),
    '',
    'Final greedy success per family (%, mean ± sd over seeds):',
    '',
    `| # | ${families.join(' | ')} |`,
    `|---|${families.map(() => '---').join('|')}|`,
    `| 0 | ${families.map((f) => formatPct(summary[0]!.startPerFamily[f] ?? spread([]))).join(' | ')} |`,
    ...configs.map(
      (_, i) =>
        `| ${i + 1} | ${families.map((f) => formatPct(summary[i]!.finalPerFamily[f] ?? spread([]))).join(' | ')} |`
    ),
  ];
  const poolIdx = configs.findIndex((c) => c.id === 'pool');
  const low = summary[0] ? lowStartFamilies(summary[0]) : [];
  if (poolIdx > 0 && low.length === 0 && summary[0]) {
    const lowest = Object.entries(summary[0].startPerFamily).sort((a, b) => a[1].mean - b[1].mean)[0];
    if (lowest)
      lines.push(
        '',
        `No family's BC start is near 0 % here (< 10 % averaged over seeds; the lowest is ${lowest[0]} at ${formatPct(lowest[1])} %), so this run cannot show the experience pool on zero-success families: run it from a weaker BC start (fewer \`--bc\` demos).`
      );
  }
  if (poolIdx > 0 && low.length > 0) {
    const before = configs[poolIdx - 1]!;
    lines.push(
      '',
      `The experience pool on the families whose BC start is near 0 % (< 10 % averaged over seeds): configuration ${poolIdx + 1} against ${poolIdx} (${before.label}), paired by seed, final greedy success:`,
      '',
      `| family | BC start % | ${before.label} % | + experience pool % | pool effect (paired), pp |`,
      `|---|---|---|---|---|`,
      ...low.map(
        (f) =>
          `| ${f} | ${formatPct(summary[0]!.startPerFamily[f]!)} | ${formatPct(summary[poolIdx - 1]!.finalPerFamily[f] ?? spread([]))} | ${formatPct(summary[poolIdx]!.finalPerFamily[f] ?? spread([]))} | ${formatEffect(pairedEffect(runs, before.id, 'pool', finalOf(f)))} |`
      ),
      `| all ${low.length} together | | | | ${formatEffect(pairedEffect(runs, before.id, 'pool', (r) => mean(low.map((f) => finalOf(f)(r)))))} |`
    );
  }
  lines.push(
    '',
    `| # | mean rollouts per group n̄ | mean steps per episode | train steps | groups trained / skipped | groups with a pooled success | wall s per run |`,
    `|---|---|---|---|---|---|---|`,
    ...configs.map((c, i) => {
      const rs = runs.filter((r) => r.configId === c.id);
      const st = (f: (x: LocalRlResult['stats']) => number) => mean(rs.map((r) => f(r.stats)));
      return `| ${i + 1} | ${st((x) => x.meanRolloutN).toFixed(2)} | ${st((x) => x.meanEpisodeSteps).toFixed(2)} | ${st((x) => x.trainSteps).toFixed(1)} | ${st((x) => x.trainedGroups).toFixed(0)} / ${st((x) => x.skippedGroups).toFixed(0)} | ${st((x) => x.injectedGroups).toFixed(1)} | ${summary[i]!.seconds.mean.toFixed(0)} |`;
    })
  );
  return lines.join('\n');
}

/** --report: tables and charts again from docs/bench/ablation.json (no rerun). */
async function ablationReport(file: string): Promise<void> {
  const data = JSON.parse(fs.readFileSync(file, 'utf8')) as AblationJson & Record<string, unknown>;
  const configs = data.configs.filter((c) => data.runs.some((r) => r.configId === c.id));
  const summary = configs.map((c) => summarizeConfig(c.id, data.runs, TARGET));
  fs.writeFileSync(file, JSON.stringify({ ...data, summary }, null, 2));
  console.log(ablationMarkdown({ ...data, configs }, summary));
  const prefix = path.basename(file, '.json');
  await ablationCharts(path.dirname(file), prefix, configs, summary, loadInfraSettings().chromiumPath);
}

export async function benchAblation(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  if (args.includes('--report')) {
    const name = `${outputName(args, quick)}.json`;
    return ablationReport(path.join(benchOutDir(), name));
  }
  const seeds = flag(args, '--seeds', quick ? 1 : 3);
  const budget = flag(args, '--episodes', quick ? 192 : 1024);
  const groupsPerRound = flag(args, '--groups', 8);
  const bcDemos = flag(args, '--bc', quick ? 160 : 400);
  const evalPerTask = flag(args, '--eval', quick ? 8 : 16);
  const finalEvalPerTask = flag(args, '--final-eval', quick ? 8 : 32);
  const evalEvery = flag(args, '--eval-every', quick ? 96 : 512);
  const suite = args.includes('--suite') ? args[args.indexOf('--suite') + 1]! : 'all';
  const only = args.includes('--configs') ? args[args.indexOf('--configs') + 1]!.split(',') : undefined;
  const configs = ablationConfigs(2).filter((c) => !only || only.includes(c.id));
  const tasks = loadSuite(suite).taskSpecs;
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket('dartflow-bench');
  // The quickstart's RL trainer (configs/quickstart.yaml: BC rate 3e-3, RL rate 1e-3, the issue-14 sweep's
  // settings), so the ablation measures the components with the trainer users get.
  const qs = parseCampaignConfig(readConfigFile(path.join(PROJECT_ROOT, 'configs/quickstart.yaml'))).trainer;
  const baseTrainer = {
    learningRate: qs.learningRate,
    rlLearningRate: qs.rlLearningRate,
    klBeta: qs.klBeta,
    epochs: qs.epochs,
    minibatchSize: qs.minibatchSize,
  };
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const outDir = benchOutDir();
  const outFile = path.join(outDir, `${outputName(args, quick)}.json`);
  fs.mkdirSync(outDir, { recursive: true });
  const settingsOut = {
    suite,
    families: tasks.map((t) => t.family),
    seeds,
    rlEpisodesPerRun: budget,
    bcDemos,
    bcEpochs: 15,
    evalEpisodesPerFamily: evalPerTask,
    startAndFinalEvalEpisodesPerFamily: finalEvalPerTask,
    evalEveryEpisodes: evalEvery,
    groupsPerRound,
    nMax: 8,
    envContexts: 4,
    trainer: baseTrainer,
    target: TARGET,
  };
  const started = Date.now();
  const loadAtStart = os.loadavg()[0]!;
  const bcRuns: Array<{
    seed: number;
    campaignId: string;
    version: number;
    demos: number;
    seconds: number;
    eval: unknown;
  }> = [];
  const runs: Array<AblationRunLike & { label: string; stats: LocalRlResult['stats']; campaignId: string }> = [];
  const write = (summary?: ConfigSummary[]) =>
    fs.writeFileSync(
      outFile,
      JSON.stringify(
        {
          measuredAt: new Date().toISOString(),
          machine: `2-core x86-64; 1-minute load average ${loadAtStart.toFixed(1)} at the start, ${os.loadavg()[0]!.toFixed(1)} when written`,
          command: `npm run bench -- ablation ${args.join(' ')}`.trim(),
          wallSeconds: (Date.now() - started) / 1000,
          settings: settingsOut,
          configs,
          bc: bcRuns,
          summary: summary ?? null,
          runs,
        },
        null,
        2
      )
    );

  for (let seed = 1; seed <= seeds; seed++) {
    const pool = new BrowserEnvPool({ slots: 4, executablePath: settings.chromiumPath });
    try {
      const bcId = `bench-ablation-${stamp}-s${seed}-bc`;
      console.log(`[bench ablation] seed ${seed}: behaviour cloning on ${bcDemos} oracle demos`);
      const bc = await runLocalRl({
        store,
        pool,
        campaignId: bcId,
        tasks,
        trainer: parseCampaignConfig({ trainer: baseTrainer }).trainer,
        groupSize: 8,
        groupsPerStep: groupsPerRound,
        maxEpisodes: 0,
        bcDemos,
        bcEpochs: 15,
        seed,
        evalEvery: 1,
        evalEpisodesPerTask: finalEvalPerTask,
        log: (l) => console.log(`  ${l}`),
      });
      bcRuns.push({
        seed,
        campaignId: bcId,
        version: bc.version,
        demos: bc.demos.length,
        seconds: bc.seconds,
        eval: bc.curve[0],
      });
      for (const cfg of configs) {
        const campaignId = `bench-ablation-${stamp}-s${seed}-${cfg.id}`;
        console.log(`[bench ablation] seed ${seed}: ${cfg.label} (${budget} RL episodes)`);
        const r = await runLocalRl({
          store,
          pool,
          campaignId,
          tasks,
          trainer: parseCampaignConfig({ trainer: { ...baseTrainer, ...cfg.trainer } }).trainer,
          groupSize: 8,
          groupsPerStep: groupsPerRound,
          maxEpisodes: budget,
          evalEvery: 1,
          evalEveryEpisodes: evalEvery,
          evalEpisodesPerTask: evalPerTask,
          finalEvalEpisodesPerTask: finalEvalPerTask,
          curation: { rollout: cfg.rollout, curation: cfg.curation },
          startFrom: { campaignId: bcId, version: bc.version },
          precollected: precollectedFrom(bc.demos, cfg.precollectPerTask),
          initialEval: bc.curve[0],
          seed,
          log: (l) => console.log(`  ${l}`),
        });
        runs.push({
          configId: cfg.id,
          label: cfg.label,
          seed,
          campaignId,
          curve: r.curve,
          episodes: r.episodes,
          seconds: r.seconds,
          stats: r.stats,
        });
        console.log(
          `  → final ${(r.curve.at(-1)!.success * 100).toFixed(1)}% in ${r.seconds.toFixed(0)} s; n̄ ${r.stats.meanRolloutN.toFixed(2)}, steps/episode ${r.stats.meanEpisodeSteps.toFixed(2)}, train steps ${r.stats.trainSteps}, injected ${r.stats.injectedGroups}`
        );
        write();
      }
    } finally {
      await pool.close();
    }
  }

  const summary = configs.map((c) => summarizeConfig(c.id, runs, TARGET));
  write(summary);
  console.log(ablationMarkdown({ settings: settingsOut, configs, runs }, summary));
  await ablationCharts(outDir, outputName(args, quick), configs, summary, settings.chromiumPath);
  console.log(`[bench ablation] wrote ${path.relative(PROJECT_ROOT, outFile)} and charts`);
}

export async function ablationCharts(
  dir: string,
  prefix: string,
  configs: Array<{ id: string; label: string }>,
  summary: ConfigSummary[],
  chromium?: string
): Promise<void> {
  const short = configs.map((c, i) => `${i + 1} ${c.id}`);
  await writeSvgAsPng(
    barChartSvg(
      [
        { label: '0 BC start', value: Number(((summary[0]?.start.mean ?? 0) * 100).toFixed(1)), color: '#888' },
        ...summary.map((s, i) => ({ label: short[i]!, value: Number((s.final.mean * 100).toFixed(1)) })),
      ],
      { title: 'Ablation: final held-out greedy success (%), mean over seeds', yLabel: 'success %', width: 860 }
    ),
    path.join(dir, `${prefix}-final.png`),
    chromium
  );
  const families = Object.keys(summary[0]?.finalPerFamily ?? {});
  await writeSvgAsPng(
    lineChartSvg(
      [
        {
          name: 'all families',
          color: '#000',
          points: [
            [0, summary[0]?.start.mean ?? 0] as [number, number],
            ...summary.map((s, i) => [i + 1, s.final.mean] as [number, number]),
          ],
        },
        ...families.map((f) => ({
          name: f,
          points: [
            [0, summary[0]?.startPerFamily[f]?.mean ?? 0] as [number, number],
            ...summary.map((s, i) => [i + 1, s.finalPerFamily[f]?.mean ?? 0] as [number, number]),
          ],
        })),
      ],
      {
        title: `Ablation per family (x: 0=BC start, ${configs.map((c, i) => `${i + 1}=${c.id}`).join(', ')})`,
        xLabel: 'configuration (cumulative)',
        yLabel: 'final held-out success (mean over seeds)',
        yMin: 0,
        yMax: 1,
        hLines: [{ y: 0.9, label: '90%' }],
        width: 1000,
        height: 480,
      }
    ),
    path.join(dir, `${prefix}-per-family.png`),
    chromium
  );
  await writeSvgAsPng(
    lineChartSvg(
      summary.map((s, i) => ({
        name: short[i]!,
        points: s.meanCurve.map((p) => [p.episodes, p.success] as [number, number]),
      })),
      {
        title: 'Ablation: held-out greedy success vs RL episodes (mean over seeds)',
        xLabel: 'RL episodes after the BC warm start',
        yLabel: 'held-out success (all families)',
        yMin: 0,
        yMax: 1,
        hLines: [{ y: 0.9, label: '90%' }],
        width: 900,
      }
    ),
    path.join(dir, `${prefix}-curves.png`),
    chromium
  );
}
