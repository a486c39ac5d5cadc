/**
 * `npm test`: installs and starts the real servers the tests need (Temporal dev server, MinIO, Chromium),
 * then runs every test/**\/*.test.ts with node:test in two lanes side by side (scripts/lib/test-lanes.ts),
 * each one file at a time.
 * Extra arguments filter test files by substring: `npm test -- storage temporal`.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { PROJECT_ROOT } from '../infra/settings';
import { ensureInfra } from './ensure-infra';
import { WORKFLOW_BUNDLE_ENV, writeOrchestratorBundle } from '../workers/workflow-bundle';
import { laneCount, testLanes, type TestLane } from './lib/test-lanes';

function findTests(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(full));
    else if (entry.name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

/**
 * One lane: node:test over its files, one file at a time. With more than one lane, the VLM lane's lines are
 * prefixed with its name (the main lane's are not), and each lane ends with its own result line.
 */
async function runLane(lane: TestLane, env: NodeJS.ProcessEnv, prefixed: boolean, started: number): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...lane.files], {
    cwd: PROJECT_ROOT,
    stdio: prefixed && lane.name !== 'main' ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    env,
  });
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    if (!stream) continue;
    readline.createInterface({ input: stream }).on('line', (line) => out.write(`[${lane.name}] ${line}\n`));
  }
  // 'close', not 'exit': the lane's piped output is drained before its result line and the final exit.
  const code: number = await new Promise((resolve) => child.on('close', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  if (prefixed)
    console.log(
      `[test] ${lane.name} lane (${lane.files.length} files) ${code === 0 ? 'passed' : `FAILED (exit ${code})`} after ${((Date.now() - started) / 1000).toFixed(1)}s`
    );
  return code;
}

async function main(): Promise<void> {
  const started = Date.now();
  const laneTotal = laneCount(process.env); // a bad DARTFLOW_TEST_LANES is refused before anything starts
  await ensureInfra();
  const filters = process.argv.slice(2);
  const files = findTests(path.join(PROJECT_ROOT, 'test'))
    .map((f) => path.relative(PROJECT_ROOT, f))
    .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
  if (files.length === 0) throw new Error(`no test files match ${filters.join(', ')}`);
  // One workflow bundle for every orchestrator worker the tests start (workers/workflow-bundle.ts).
  const bundleDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-test-bundle-'));
  const bundle = await writeOrchestratorBundle(bundleDir).catch((err: unknown) => {
    // Every worker then bundles (and reports) on its own; the tests say what is wrong with the workflows.
    console.warn(`[test] workflow bundle failed, workers bundle their own: ${String(err)}`);
    return '';
  });
  const lanes = testLanes(files, laneTotal);
  console.log(
    `[test] ${files.length} test files in ${lanes.map((l) => `${l.name} lane: ${l.files.length}`).join(', ')}; infra ready in ${((Date.now() - started) / 1000).toFixed(1)}s`
  );
  // Under DARTFLOW_TEST=1 worker processes serve no metrics unless a test gives them a free port, so the
  // lanes cannot collide on metrics ports.
  const env = { ...process.env, DARTFLOW_TEST: '1', [WORKFLOW_BUNDLE_ENV]: bundle };
  const codes = await Promise.all(lanes.map((lane) => runLane(lane, env, lanes.length > 1, started)));
  const code = Math.max(...codes);
  fs.rmSync(bundleDir, { recursive: true, force: true });
  console.log(`[test] finished in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  process.exit(code);
}

main().catch((err: unknown) => {
  console.error(`[test] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
