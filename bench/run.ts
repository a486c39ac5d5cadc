/**
 * `npm run bench -- <suite> [--publish] [options]`: benchmarks (not tests). Results and charts go to
 * .data/bench/ (git-ignored); with --publish to docs/bench/, the tracked numbers docs/benchmarks.md shows.
 * Servers this run had to start are stopped at the end; servers that were already running keep running.
 */
import { ensureInfraSession } from '../scripts/ensure-infra';
import { benchAblation } from './ablation';
import { benchCharts } from './charts';
import { benchChaos } from './chaos';
import { benchControlPlane } from './control-plane';
import { benchEfficiency } from './efficiency';
import { benchLearning } from './learning';
import { NOTHING_WRITTEN, benchOutDir, setBenchPublish, shownPath } from './lib/output';
import { splitPublishFlag } from './lib/output-dir';
import { benchOverhead } from './overhead';
import { benchQuickstart } from './quickstart';
import { benchScale } from './scale';
import { benchSoak } from './soak';

// A suite resolves with NOTHING_WRITTEN when this run wrote no results (e.g. one segment of a soak).
const SUITES: Record<string, (args: string[]) => Promise<void | typeof NOTHING_WRITTEN>> = {
  learning: benchLearning,
  quickstart: benchQuickstart,
  ablation: benchAblation,
  charts: () => benchCharts(),
  replot: (args) => import('./charts').then((m) => m.benchReplot(args)),
  chaos: benchChaos,
  efficiency: benchEfficiency,
  overhead: benchOverhead,
  scale: benchScale,
  'control-plane': benchControlPlane,
  soak: benchSoak,
  viewer: (args) => import('./viewer').then((m) => m.benchViewer(args)),
  miniwob: (args) => import('./miniwob').then((m) => m.benchMiniwob(args)),
  vlm: (args) => import('./vlm').then((m) => m.benchVlm(args)),
  suite: (args) => import('./suite').then((m) => m.benchSuite(args)),
  'vlm-grounding': (args) => import('./vlm-grounding').then((m) => m.benchVlmGrounding(args)),
};

const USAGE = `usage: npm run bench -- <suite> [--publish] [suite options]
suites: ${Object.keys(SUITES).join(', ')}
  results go to .data/bench/ (git-ignored); --publish writes docs/bench/ (tracked, quoted by docs/benchmarks.md)
  servers this run starts are stopped at the end; servers already running are left running
(also: npx tsx bench/env-throughput.ts [--publish], npx tsx bench/policy-throughput.ts [--publish],
 npx tsx bench/miniwob.ts [--publish] [--campaign])`;

async function main(): Promise<number> {
  const [suite, ...rest] = process.argv.slice(2);
  const run = suite ? SUITES[suite] : undefined;
  if (!run) {
    console.log(USAGE);
    return suite ? 1 : 0;
  }
  const { publish, args } = splitPublishFlag(rest);
  setBenchPublish(publish);
  const infra = await ensureInfraSession({ quiet: true });
  // `kill <pid>` ends the run: the servers this run started stop, and process.exit runs the exit hooks of
  // what it spawned (vLLM is killed by its hook) while role processes follow their parent
  // (infra/parent-watch.ts). Without this the Temporal SDK's own SIGTERM handler only shut the in-process
  // workers down, and the benchmark went on driving a campaign whose results nobody would read.
  process.once('SIGTERM', () => {
    console.error('[bench] SIGTERM: stopping what this run started');
    void infra
      .stopStartedHere()
      .catch(() => [])
      .finally(() => process.exit(143));
  });
  try {
    if ((await run(args)) === NOTHING_WRITTEN)
      console.log('[bench] no results written by this run (a later one writes them)');
    else console.log(`[bench] results in ${shownPath(benchOutDir())}${publish ? ' (published)' : ''}`);
  } finally {
    const stopped = await infra.stopStartedHere();
    if (stopped.length) console.log(`[bench] stopped the servers this run started: ${stopped.join(', ')}`);
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  }
);
