/**
 * `npm test`: installs and starts the real servers the tests need (Temporal dev server, MinIO, Chromium),
 * then runs every test/**\/*.test.ts with node:test, one file at a time (deterministic on 2 cores).
 * Extra arguments filter test files by substring: `npm test -- storage temporal`.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/settings';
import { ensureInfra } from './ensure-infra';
import { WORKFLOW_BUNDLE_ENV, writeOrchestratorBundle } from '../workers/workflow-bundle';

function findTests(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(full));
    else if (entry.name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

async function main(): Promise<void> {
  const started = Date.now();
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
  console.log(`[test] ${files.length} test files; infra ready in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
    cwd: PROJECT_ROOT,
    stdio: 'inherit',
    env: { ...process.env, DARTFLOW_TEST: '1', [WORKFLOW_BUNDLE_ENV]: bundle },
  });
  const code: number = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  fs.rmSync(bundleDir, { recursive: true, force: true });
  console.log(`[test] finished in ${((Date.now() - started) / 1000).toFixed(1)}s`);
  process.exit(code);
}

main().catch((err: unknown) => {
  console.error(`[test] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
