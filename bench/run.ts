/** `npm run bench -- <suite> [options]`: benchmarks (not tests); results and charts go to docs/bench/. */
import { ensureInfra } from '../scripts/ensure-infra';
import { benchAblation } from './ablation';
import { benchCharts } from './charts';
import { benchChaos } from './chaos';
import { benchEfficiency } from './efficiency';
import { benchLearning } from './learning';
import { benchOverhead } from './overhead';
import { benchQuickstart } from './quickstart';
import { benchScale } from './scale';

const SUITES: Record<string, (args: string[]) => Promise<void>> = {
  learning: benchLearning,
  quickstart: benchQuickstart,
  ablation: benchAblation,
  charts: () => benchCharts(),
  chaos: benchChaos,
  efficiency: benchEfficiency,
  overhead: benchOverhead,
  scale: benchScale,
};

async function main(): Promise<void> {
  const [suite, ...args] = process.argv.slice(2);
  const run = suite ? SUITES[suite] : undefined;
  if (!run) {
    console.log(
      `usage: npm run bench -- <suite>\nsuites: ${Object.keys(SUITES).join(', ')}\n(also: npx tsx bench/env-throughput.ts, npx tsx bench/policy-throughput.ts)`
    );
    process.exit(suite ? 1 : 0);
  }
  await ensureInfra({ quiet: true });
  await run(args);
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
