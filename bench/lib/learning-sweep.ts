/**
 * The issue-14 RL sweep: which trainer settings make DART's step-wise GRPO lift a deliberately weak
 * behaviour-cloning start on the quickstart families (click-target + click-colour), measured in RL episodes
 * and train steps (never wall time: the machine is shared). One factor at a time around a base setting —
 * learning rate, epochs, KL coefficient to the BC reference, per-step vs per-trajectory advantage
 * statistics, carried vs fresh Adam moments — each over the same seeds: per seed, one BC start (oracle demos,
 * few epochs) is trained once and every setting starts from a copy of it (same weights, same Adam state,
 * same held-out seeds), so settings are paired by seed. Rollout and curation are configs/quickstart.yaml's.
 *
 * Run: npm run bench -- learning --sweep [--seeds 1,2] [--episodes 1024] [--eval-every 512] [--eval 64]
 *   [--demos 24] [--bc-epochs 4] [--settings base,lr-3e-3,mb-16,...] [--specs v3,v2] [--out learning-sweep.json] [--publish]
 * `--specs`: the policy architectures to run (each with its own BC start per seed): `v3` the default,
 * `v2` the default without the instruction query in the click head (spec v2's network); a run of a
 * non-default spec is labelled `<setting>@<spec>`.
 * `--report [file]` prints the table of a saved result. Writes <bench out dir>/learning-sweep.json after
 * every run (an interrupted sweep keeps what it measured) and learning-sweep.md (the table).
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadCampaignConfig } from '../../config/load';
import { BrowserEnvPool } from '../../envs';
import { loadInfraSettings, PROJECT_ROOT } from '../../infra/settings';
import type { CampaignConfig, CampaignConfigInput } from '../../schemas/config';
import { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks/loader';
import { clickQueryPolicySpec, v2PolicySpec, type PolicySpec } from '../../policy/spec';
import { runLocalRl, type CurvePoint, type LocalRlStats } from './local-rl';
import { benchOutDir, shownPath } from './output';

type TrainerOverrides = Partial<CampaignConfigInput['trainer']>;

/**
 * The settings of the sweep: the base and one change each (names are what the table shows). The learning
 * rates are RL's (`rlLearningRate`): the quickstart sets it apart from the cloning rate, so a change of
 * `learningRate` alone would leave every RL step as it was.
 */
export const SWEEP_SETTINGS: Record<string, TrainerOverrides> = {
  base: {},
  'lr-3e-3': { rlLearningRate: 3e-3 },
  'lr-3e-4': { rlLearningRate: 3e-4 },
  'lr-1e-2': { rlLearningRate: 1e-2 },
  'epochs-4': { epochs: 4 },
  'epochs-1': { epochs: 1 },
  'mb-16': { minibatchSize: 16 },
  'kl-0.02': { klBeta: 0.02 },
  'kl-0.1': { klBeta: 0.1 },
  'adv-traj': { advantageStatistics: 'trajectories' },
  'adam-fresh': { optimizerReset: 'rl-start' },
  'adam-every': { optimizerReset: 'every-step' },
};

/**
 * The trainer a setting runs: configs/quickstart.yaml's as it is (the base: RL steps at rlLearningRate 1e-3,
 * 2 epochs, minibatch 64, no KL, per-step statistics, carried Adam), then the setting's one change. Files from
 * before 2026-12-02 17:00 UTC used the pre-issue-14 trainer as their base (lr 3e-3 for both, in setup.base).
 */
export function sweepTrainer(quickstart: CampaignConfig['trainer'], name: string): CampaignConfig['trainer'] {
  const setting = SWEEP_SETTINGS[name];
  if (!setting) throw new Error(`unknown sweep setting ${name}: one of ${Object.keys(SWEEP_SETTINGS).join(', ')}`);
  return { ...quickstart, ...setting } as CampaignConfig['trainer'];
}

/** The architectures `--specs` can name (v2's network = the default; v3 = with the click query). */
export const SWEEP_SPECS: Record<string, PolicySpec> = {
  v3: clickQueryPolicySpec,
  v2: v2PolicySpec,
};

export interface SweepRun {
  setting: string;
  /** `--specs` name of the policy architecture (absent in files from before the option: the default of then). */
  spec?: string;
  seed: number;
  trainer: CampaignConfig['trainer'];
  start: CurvePoint;
  curve: CurvePoint[];
  final: CurvePoint;
  episodes: number;
  trainSteps: number;
  /** RL episodes and train steps at the first evaluation with every family ≥ 90 % greedy (null: not reached). */
  reached90: { episodes: number; trainSteps: number } | null;
  stats: LocalRlStats;
}

export interface SweepFile {
  measuredAt: string;
  machine: string;
  command: string;
  setup: {
    families: string[];
    seeds: number[];
    /** `--specs` names (absent in files from before the option). */
    specs?: string[];
    episodes: number;
    evalEvery: number;
    evalEpisodesPerFamily: number;
    bcDemos: number;
    bcEpochs: number;
    base: TrainerOverrides;
    settings: Record<string, TrainerOverrides>;
  };
  starts: Array<{ seed: number; campaignId: string; version: number; eval: CurvePoint }>;
  runs: SweepRun[];
}

/** The value after `name` in args, or fallback (also when the next arg is another option). */
export function argOf(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] && !args[i + 1]!.startsWith('--') ? args[i + 1]! : fallback;
}

const pct = (v: number | undefined): string => (v === undefined ? '–' : (v * 100).toFixed(0));
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const minFamily = (p: CurvePoint): number => Math.min(...Object.values(p.perTask));

/** "0 → 61/30, 640 → 62/64, 1280 → …": the curve points every seed of the setting has, means over seeds. */
function curveCell(rs: SweepRun[]): string {
  const points = rs[0]!.curve.map((_, i) => i).filter((i) => rs.every((r) => r.curve[i] !== undefined));
  return points
    .map((i) => {
      const at = Math.round(mean(rs.map((r) => r.curve[i]!.episodes)));
      const g = mean(rs.map((r) => r.curve[i]!.success));
      const t = rs.every((r) => r.curve[i]!.sampledSuccess !== undefined)
        ? pct(mean(rs.map((r) => r.curve[i]!.sampledSuccess!)))
        : '–';
      return `${at} → ${pct(g)}/${t}`;
    })
    .join(', ');
}

/** One row per setting: means over its seeds (the per-seed finals in brackets). Markdown. */
export function sweepTable(file: SweepFile): string {
  const { families } = file.setup;
  const head = [
    'setting',
    'change',
    'seeds',
    'BC start greedy',
    'final greedy',
    ...families.map((f) => `final ${f}`),
    'final T=1',
    'lift (points)',
    'min family',
    'reached ≥90 % both (seeds)',
    'episodes to ≥90 % (mean of reached)',
    'RL episodes',
    'curve: episodes → greedy / T=1 (mean over seeds)',
  ];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  const settings = [...new Set(file.runs.map((r) => r.setting))];
  for (const s of settings) {
    const rs = file.runs.filter((r) => r.setting === s);
    const reached = rs.filter((r) => r.reached90);
    const change = Object.entries(file.setup.settings[s.replace(/@.*$/, '')] ?? {})
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(', ');
    lines.push(
      `| ${[
        s,
        change || '(base)',
        rs.map((r) => r.seed).join(','),
        pct(mean(rs.map((r) => r.start.success))),
        `${pct(mean(rs.map((r) => r.final.success)))} (${rs.map((r) => pct(r.final.success)).join('/')})`,
        ...families.map((f) => pct(mean(rs.map((r) => r.final.perTask[f] ?? 0)))),
        rs.every((r) => r.final.sampledSuccess !== undefined) ? pct(mean(rs.map((r) => r.final.sampledSuccess!))) : '–',
        ((mean(rs.map((r) => r.final.success)) - mean(rs.map((r) => r.start.success))) * 100).toFixed(0),
        pct(mean(rs.map((r) => minFamily(r.final)))),
        `${reached.length}/${rs.length}`,
        reached.length ? mean(reached.map((r) => r.reached90!.episodes)).toFixed(0) : '–',
        rs.map((r) => r.episodes).join('/'),
        curveCell(rs),
      ].join(' | ')} |`
    );
  }
  return lines.join('\n');
}

function writeOut(file: string, data: SweepFile): void {
  fs.writeFileSync(file, JSON.stringify(data, null, 2));
  fs.writeFileSync(file.replace(/\.json$/, '.md'), `${sweepTable(data)}\n`);
}

export async function benchLearningSweep(args: string[]): Promise<void> {
  const outFile = path.join(benchOutDir(), argOf(args, '--out', 'learning-sweep.json'));
  if (args.includes('--report')) {
    // --report a.json,b.json: the runs of several invocations (same setup apart from the budget) in one table.
    const files = argOf(args, '--report', path.basename(outFile)).split(',');
    const saved = files.map((f) => JSON.parse(fs.readFileSync(path.resolve(benchOutDir(), f), 'utf8')) as SweepFile);
    const merged: SweepFile = {
      ...saved[0]!,
      setup: {
        ...saved[0]!.setup,
        settings: Object.assign({}, ...saved.map((s) => s.setup.settings)) as Record<string, TrainerOverrides>,
      },
      starts: saved.flatMap((s) => s.starts),
      runs: saved.flatMap((s) => s.runs),
    };
    const table = sweepTable(merged);
    console.log(table);
    if (args.includes('--merge-to')) writeOut(path.join(benchOutDir(), argOf(args, '--merge-to', 'x.json')), merged);
    return;
  }
  const seeds = argOf(args, '--seeds', '1,2').split(',').map(Number);
  const episodes = Number(argOf(args, '--episodes', '1024'));
  const evalEvery = Number(argOf(args, '--eval-every', '512'));
  const evalEpisodes = Number(argOf(args, '--eval', '64'));
  const bcDemos = Number(argOf(args, '--demos', '24'));
  const bcEpochs = Number(argOf(args, '--bc-epochs', '4'));
  const names = argOf(args, '--settings', Object.keys(SWEEP_SETTINGS).join(',')).split(',');
  for (const n of names) if (!SWEEP_SETTINGS[n]) throw new Error(`unknown sweep setting ${n}`);
  const specNames = argOf(args, '--specs', 'v3').split(',');
  for (const n of specNames) if (!SWEEP_SPECS[n]) throw new Error(`unknown sweep spec ${n}`);
  const quickstart = loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml'));
  const families = ['click-target', 'click-colour'];
  const tasks = families.map((f) => loadTask(f));
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket('dartflow-bench');
  const stamp = Date.now();
  // Rollout and curation as the quickstart campaign plans them (dynamic rollout number and max steps).
  const curation = {
    // The task turns and rewards the published sweep had (the quickstart's signal turns and step discount came later).
    rollout: {
      ...quickstart.rollout,
      envConcurrency: undefined,
      taskTurns: 'round-robin' as const,
      solvedTaskEvery: 1,
    },
    curation: { ...quickstart.curation, stepDiscount: 1 },
  };
  const trainerOf = (name: string): CampaignConfig['trainer'] => sweepTrainer(quickstart.trainer, name);
  const data: SweepFile = {
    measuredAt: new Date().toISOString(),
    machine: '2-core x86-64 (measured in episodes, not time)',
    command: `npm run bench -- learning --sweep ${args.filter((a) => a !== '--publish').join(' ')}`.trim(),
    setup: {
      families,
      seeds,
      specs: specNames,
      episodes,
      evalEvery,
      evalEpisodesPerFamily: evalEpisodes,
      bcDemos,
      bcEpochs,
      base: trainerOf('base'),
      settings: Object.fromEntries(names.map((n) => [n, SWEEP_SETTINGS[n]!])),
    },
    starts: [],
    runs: [],
  };
  const pool = new BrowserEnvPool({ slots: 4, executablePath: settings.chromiumPath });
  try {
    for (const seed of seeds)
      for (const specName of specNames) {
        const spec = SWEEP_SPECS[specName]!;
        const label = (name: string) => (specName === 'v3' ? name : `${name}@${specName}`);
        // The weak start: a few oracle demos, a few epochs (the same for every setting of this seed and spec).
        const startId = `bench-sweep-start-${specName}-s${seed}-${stamp}`;
        console.log(`[bench learning --sweep] seed ${seed}: BC start on ${bcDemos} demos × ${bcEpochs} epochs`);
        const bc = await runLocalRl({
          store,
          pool,
          campaignId: startId,
          tasks,
          trainer: trainerOf('base'),
          spec,
          seed,
          groupSize: 8,
          groupsPerStep: 8,
          maxEpisodes: 0,
          bcDemos,
          bcEpochs,
          evalEvery: 1_000_000,
          evalEpisodesPerTask: evalEpisodes,
          curation,
          log: (l) => console.log(`  ${l}`),
        });
        const start = bc.curve[0]!;
        data.starts.push({ seed, campaignId: startId, version: bc.version, eval: start });
        for (const name of names) {
          const trainer = trainerOf(name);
          console.log(`[bench learning --sweep] seed ${seed}, ${label(name)}: ${JSON.stringify(SWEEP_SETTINGS[name])}`);
          const r = await runLocalRl({
            store,
            pool,
            campaignId: `bench-sweep-${name}-${specName}-s${seed}-${stamp}`,
            tasks,
            trainer,
            spec,
            seed,
            groupSize: 8,
            groupsPerStep: 8,
            maxEpisodes: episodes,
            startFrom: { campaignId: startId, version: bc.version },
            initialEval: start,
            evalEvery: 1_000_000,
            evalEveryEpisodes: evalEvery,
            evalEpisodesPerTask: evalEpisodes,
            curation,
            log: (l) => console.log(`  ${l}`),
          });
          // Train steps at each curve point are not recorded by the loop; versions are (one per step).
          const hit = r.curve.find((p) => p.episodes > 0 && minFamily(p) >= 0.9);
          data.runs.push({
            setting: label(name),
            spec: specName,
            seed,
            trainer,
            start,
            curve: r.curve,
            final: r.curve[r.curve.length - 1]!,
            episodes: r.episodes,
            trainSteps: r.stats.trainSteps,
            reached90: hit ? { episodes: hit.episodes, trainSteps: hit.version } : null,
            stats: r.stats,
          });
          writeOut(outFile, data);
        }
      }
  } finally {
    await pool.close();
  }
  const table = sweepTable(data);
  console.log(`\n${table}`);
  console.log(
    `[bench learning --sweep] wrote ${shownPath(outFile)} and ${shownPath(outFile.replace(/\.json$/, '.md'))}`
  );
}
