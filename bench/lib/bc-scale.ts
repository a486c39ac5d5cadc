/**
 * How far behaviour cloning alone takes the embedded policy on a suite (issue 14.4): for each point of a
 * grid of (oracle demos, epochs), a fresh policy is cloned from that many demos spread round-robin over the
 * suite's families and evaluated greedy on held-out seeds — no RL. It answers what start the whole-suite
 * campaign can have, and so how much of the suite's goal is left for RL to do.
 *
 * Run: npm run bench -- learning --bc-scale [--grid 256x8,1024x8,2048x16,4096x16] [--suite all] [--seeds 1]
 *   [--eval 32] [--spec default|max-context|word-query] [--out learning-bc-scale.json] [--publish]
 * --spec max-context clones the network with the global max in its click context (policy.clickMaxContext);
 * --spec word-query the one with per-word click queries (policy.clickWordQuery).
 * Writes <bench out dir>/learning-bc-scale.json after every point (an interrupted run keeps what it measured)
 * and learning-bc-scale.png (greedy success per family against demos, one chart line per family and epochs).
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadCampaignConfig } from '../../config/load';
import { BrowserEnvPool } from '../../envs';
import { loadInfraSettings, PROJECT_ROOT } from '../../infra/settings';
import { lineChartSvg, writeSvgAsPng, type Series } from '../../lib/charts';
import { ObjectStore } from '../../storage/object-store';
import { loadSuite } from '../../tasks/loader';
import { defaultPolicySpec, maxContextPolicySpec, wordQueryPolicySpec, type PolicySpec } from '../../policy/spec';
import { runLocalRl } from './local-rl';
import { argOf } from './learning-sweep';
import { benchOutDir, shownPath } from './output';

export interface BcGridPoint {
  demos: number;
  epochs: number;
}

/** "2048x16,4096x8" → points; a clear error names the bad entry. */
export function parseBcGrid(raw: string): BcGridPoint[] {
  return raw.split(',').map((entry) => {
    const m = /^(\d+)x(\d+)$/.exec(entry.trim());
    const demos = m ? Number(m[1]) : NaN;
    const epochs = m ? Number(m[2]) : NaN;
    if (!m || demos < 1 || epochs < 1)
      throw new Error(`--grid entry ${JSON.stringify(entry)}: write <demos>x<epochs> with both ≥ 1, e.g. 2048x16`);
    return { demos, epochs };
  });
}

export interface BcScaleRow extends BcGridPoint {
  seed: number;
  /** Successful demos cloned (an oracle episode that failed is not a demo). */
  demosCloned: number;
  greedy: number;
  perFamily: Record<string, number>;
  /** Wall time of the point: demos, cloning and the evaluation, on a machine nothing else used. */
  minutes: number;
}

/** One chart line per (family, epochs): greedy held-out success against the number of demos. */
export function bcScaleSeries(rows: BcScaleRow[], families: string[]): Series[] {
  const epochs = [...new Set(rows.map((r) => r.epochs))].sort((a, b) => a - b);
  const series: Series[] = [];
  for (const e of epochs)
    for (const f of families) {
      const byDemos = new Map<number, number[]>();
      for (const r of rows.filter((x) => x.epochs === e && x.perFamily[f] !== undefined))
        byDemos.set(r.demos, [...(byDemos.get(r.demos) ?? []), r.perFamily[f]!]);
      const points = [...byDemos.entries()]
        .sort(([a], [b]) => a - b)
        .map(([d, vs]): [number, number] => [d, (100 * vs.reduce((a, b) => a + b, 0)) / vs.length]);
      if (points.length > 0) series.push({ name: epochs.length > 1 ? `${f} (${e} epochs)` : f, points });
    }
  return series;
}

/** The network a --spec name clones (every option has the same initial weights for a seed but its own zero-initialised tensor). */
export const BC_SCALE_SPECS: Record<string, PolicySpec> = {
  default: defaultPolicySpec,
  'max-context': maxContextPolicySpec,
  'word-query': wordQueryPolicySpec,
};

export function bcScaleSpec(name: string): PolicySpec {
  const spec = BC_SCALE_SPECS[name];
  if (!spec) throw new Error(`--spec: ${JSON.stringify(name)} is not one of ${Object.keys(BC_SCALE_SPECS).join(', ')}`);
  return spec;
}

/** An integer ≥ min, or an error naming the option (before any browser starts). */
export function wholeNumber(option: string, raw: string, min: number): number {
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) throw new Error(`${option}: ${JSON.stringify(raw)} is not an integer ≥ ${min}`);
  return v;
}

export async function benchBcScale(args: string[]): Promise<void> {
  const grid = parseBcGrid(argOf(args, '--grid', '256x8,1024x8,2048x16,4096x16'));
  const suite = loadSuite(argOf(args, '--suite', 'all'));
  const seeds = argOf(args, '--seeds', '1')
    .split(',')
    .map((x) => wholeNumber('--seeds', x, 0));
  const evalEpisodes = wholeNumber('--eval', argOf(args, '--eval', '32'), 1);
  const specName = argOf(args, '--spec', 'default');
  const spec = bcScaleSpec(specName);
  // Another network's run never overwrites the default's file.
  const defaultOut = specName === 'default' ? 'learning-bc-scale.json' : `learning-bc-scale-${specName}.json`;
  const outFile = path.join(benchOutDir(), argOf(args, '--out', defaultOut));

  const tasks = suite.taskSpecs;
  const families = tasks.map((t) => t.family);
  // The cloning rate and minibatch of the campaigns that use these starts (configs/quickstart.yaml).
  const trainer = loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml')).trainer;
  const settings = loadInfraSettings();
  const store = ObjectStore.fromSettings(settings).withBucket('dartflow-bench');
  const out = {
    measuredAt: new Date().toISOString(),
    command:
      `npm run bench -- learning --bc-scale ${args.filter((a) => a !== '--publish' && a !== '--bc-scale').join(' ')}`.trim(),
    setup: {
      suite: suite.id,
      families,
      evalEpisodesPerFamily: evalEpisodes,
      learningRate: trainer.learningRate,
      minibatchSize: trainer.minibatchSize,
      envSlots: 4,
      spec: specName,
    },
    rows: [] as BcScaleRow[],
  };
  for (const seed of seeds)
    for (const point of grid) {
      const pool = new BrowserEnvPool({ slots: 4, executablePath: settings.chromiumPath });
      const t0 = Date.now();
      try {
        const r = await runLocalRl({
          store,
          pool,
          campaignId: `bench-bc-scale-${specName}-${point.demos}x${point.epochs}-s${seed}-${t0}`,
          tasks,
          spec,
          trainer,
          groupSize: 8,
          groupsPerStep: 16,
          maxEpisodes: 0,
          bcDemos: point.demos,
          bcEpochs: point.epochs,
          seed,
          evalEvery: 1,
          evalEpisodesPerTask: evalEpisodes,
          sampledEval: false,
          log: (l) => console.log(`  ${l}`),
        });
        const evaluated = r.curve[0]!;
        const row: BcScaleRow = {
          ...point,
          seed,
          demosCloned: r.demos.length,
          greedy: evaluated.success,
          perFamily: evaluated.perTask,
          minutes: Number(((Date.now() - t0) / 60_000).toFixed(2)),
        };
        out.rows.push(row);
        fs.writeFileSync(outFile, JSON.stringify(out, null, 2));
        console.log(
          `[bench bc-scale] ${point.demos} demos × ${point.epochs} epochs (seed ${seed}): greedy ${(row.greedy * 100).toFixed(1)} % ${families.map((f) => `${f} ${Math.round(row.perFamily[f]! * 100)}`).join(', ')} in ${row.minutes.toFixed(1)} min`
        );
      } finally {
        await pool.close();
      }
    }
  const png = outFile.replace(/\.json$/, '.png');
  await writeSvgAsPng(
    lineChartSvg(bcScaleSeries(out.rows, families), {
      title: `behaviour cloning alone on suite \`${suite.id}\` (${specName} network): held-out greedy success (${evalEpisodes} per family)`,
      xLabel: 'oracle demos (all families)',
      yLabel: 'greedy success %',
      yMin: 0,
      yMax: 100,
      width: 900,
      height: 480,
    }),
    png,
    settings.chromiumPath
  );
  console.log(`[bench bc-scale] wrote ${shownPath(outFile)} and ${shownPath(png)}`);
}
