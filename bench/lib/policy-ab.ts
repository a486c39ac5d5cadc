/**
 * The issue-14 policy A/B: spec v1's architecture (legacyPolicySpec) against it plus one fix at a time —
 * the collision-free vocabulary (`words`), the click context (`context`), the previous-action input
 * (`prev`) — and all three (`all` = the default spec). Every run of a seed gets the same behaviour-cloning
 * demos (oracle, same task seeds), the same RL budget and the same held-out seeds, so runs are paired by
 * seed. Run: npm run bench -- learning --ab [--variants legacy,words] [--seeds 1,2] [--episodes 512]
 *   [--demos 400] [--eval 32] [--families click-colour,pick-menu,focus-field,tick-checkboxes] [--out file.json]
 * `--report a.json,b.json` prints the tables of saved results together.
 * Writes <bench out dir>/learning-ab.json (or --out) after every run (a partial result survives an interrupted bench).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseCampaignConfig } from '../../config/load';
import { BrowserEnvPool } from '../../envs';
import { loadInfraSettings } from '../../infra/settings';
import { defaultPolicySpec, legacyPolicySpec, paramCount, v2PolicySpec, type PolicySpec } from '../../policy/spec';
import { ObjectStore } from '../../storage/object-store';
import { loadTask } from '../../tasks/loader';
import { runLocalRl, type CurvePoint } from './local-rl';
import { benchOutDir, shownPath } from './output';

export const AB_VARIANTS: Record<string, PolicySpec> = {
  legacy: legacyPolicySpec,
  words: { ...legacyPolicySpec, textEncoding: defaultPolicySpec.textEncoding, vocabSize: defaultPolicySpec.vocabSize },
  context: { ...legacyPolicySpec, clickContext: true },
  prev: { ...legacyPolicySpec, previousAction: true },
  all: v2PolicySpec, // the A/B as published: every fix of issue 14.1, without the later click query
};

export interface AbRun {
  variant: string;
  seed: number;
  params: number;
  afterBc: CurvePoint;
  final: CurvePoint;
  episodes: number;
  seconds: number;
}

function argList(args: string[], name: string, fallback: string[]): string[] {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1]!.split(',').filter(Boolean) : fallback;
}

const pct = (v: number): string => (v * 100).toFixed(0).padStart(4);

/** Mean per family and overall over the seeds of each variant, as a text table. */
export function abTable(runs: AbRun[], families: string[], point: 'afterBc' | 'final'): string {
  const variants = [...new Set(runs.map((r) => r.variant))];
  const lines = [`variant  params  seeds  all  ${families.join('  ')}  no-op-repeat-steps`];
  for (const v of variants) {
    const rs = runs.filter((r) => r.variant === v);
    const mean = (f: (r: AbRun) => number) => rs.reduce((a, r) => a + f(r), 0) / rs.length;
    const cells = families.map((f) => pct(mean((r) => r[point].perTask[f] ?? 0)));
    const repeats = rs.every((r) => r[point].noopRepeats !== undefined)
      ? pct(mean((r) => r[point].noopRepeats!))
      : '   -';
    lines.push(
      `${v.padEnd(8)} ${String(rs[0]!.params).padStart(6)}  ${rs.map((r) => r.seed).join(',')}  ${pct(mean((r) => r[point].success))}  ${cells.join('  ')}  ${repeats}`
    );
  }
  return lines.join('\n');
}

/** `--report a.json,b.json`: the tables of saved runs (e.g. seeds measured in separate invocations). */
function reportSaved(files: string[]): void {
  const saved = files.map(
    (f) =>
      JSON.parse(fs.readFileSync(path.resolve(benchOutDir(), f), 'utf8')) as {
        setup: { families: string[]; episodes: number };
        runs: AbRun[];
      }
  );
  const runs = saved.flatMap((s) => s.runs);
  const { families, episodes } = saved[0]!.setup;
  console.log(`held-out greedy success after BC (%):\n${abTable(runs, families, 'afterBc')}`);
  console.log(`\nafter ${episodes} RL episodes (%):\n${abTable(runs, families, 'final')}`);
}

export async function benchPolicyAb(args: string[]): Promise<void> {
  if (args.includes('--report')) return reportSaved(argList(args, '--report', ['learning-ab.json']));
  const variants = argList(args, '--variants', ['legacy', 'words', 'context', 'prev']);
  const seeds = argList(args, '--seeds', ['1', '2']).map(Number);
  const families = argList(args, '--families', ['click-colour', 'pick-menu', 'focus-field', 'tick-checkboxes']);
  const episodes = Number(argList(args, '--episodes', ['512'])[0]);
  const demos = Number(argList(args, '--demos', ['400'])[0]);
  const evalEpisodes = Number(argList(args, '--eval', ['32'])[0]);
  for (const v of variants) if (!AB_VARIANTS[v]) throw new Error(`unknown variant ${v}`);
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket('dartflow-bench');
  const trainer = parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0, epochs: 2 } }).trainer;
  const outFile = path.join(benchOutDir(), argList(args, '--out', ['learning-ab.json'])[0]!);
  const runs: AbRun[] = [];
  const setup = { families, episodes, demos, evalEpisodesPerFamily: evalEpisodes, trainer, groupSize: 8 };
  for (const seed of seeds) {
    for (const variant of variants) {
      const spec = AB_VARIANTS[variant]!;
      const pool = new BrowserEnvPool({ slots: 4, executablePath: settings.chromiumPath });
      try {
        console.log(`[bench learning --ab] ${variant} seed ${seed} (${paramCount(spec)} parameters)`);
        const r = await runLocalRl({
          store,
          pool,
          campaignId: `bench-ab-${variant}-s${seed}-${Date.now()}`,
          tasks: families.map((f) => loadTask(f)),
          trainer,
          spec,
          seed,
          groupSize: 8,
          groupsPerStep: 8,
          maxEpisodes: episodes,
          bcDemos: demos,
          bcEpochs: 15,
          evalEvery: 1_000_000,
          evalEveryEpisodes: 1_000_000,
          evalEpisodesPerTask: evalEpisodes,
          log: (l) => console.log(`  ${l}`),
        });
        runs.push({
          variant,
          seed,
          params: paramCount(spec),
          afterBc: r.curve[0]!,
          final: r.curve[r.curve.length - 1]!,
          episodes: r.episodes,
          seconds: r.seconds,
        });
      } finally {
        await pool.close();
      }
      fs.writeFileSync(
        outFile,
        JSON.stringify(
          { measuredAt: new Date().toISOString(), machine: '2-core x86-64 (shared)', setup, runs },
          null,
          2
        )
      );
    }
  }
  console.log(`\nheld-out greedy success after BC (%):\n${abTable(runs, families, 'afterBc')}`);
  console.log(`\nafter ${episodes} RL episodes (%):\n${abTable(runs, families, 'final')}`);
  console.log(`[bench learning --ab] wrote ${shownPath(outFile)}`);
}
