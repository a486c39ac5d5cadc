/**
 * `npm run bench` writes to the git-ignored data dir unless asked to publish: trying a benchmark must not
 * rewrite the tracked numbers under docs/bench that docs/benchmarks.md quotes.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { benchOutputDir, splitPublishFlag } from '../../bench/lib/output-dir';
import { PROJECT_ROOT } from '../../infra/settings';

const root = '/repo';

test('results go to <dataDir>/bench by default and to docs/bench only with --publish', () => {
  assert.equal(benchOutputDir({ publish: false, projectRoot: root, dataDir: '/repo/.data' }), '/repo/.data/bench');
  assert.equal(benchOutputDir({ publish: false, projectRoot: root, dataDir: '/scratch/d' }), '/scratch/d/bench');
  assert.equal(benchOutputDir({ publish: true, projectRoot: root, dataDir: '/repo/.data' }), '/repo/docs/bench');
});

test('--publish is taken out of the suite arguments wherever it appears; other flags stay in order', () => {
  assert.deepEqual(splitPublishFlag(['--rounds', '4', '--publish', '--browser']), {
    publish: true,
    args: ['--rounds', '4', '--browser'],
  });
  assert.deepEqual(splitPublishFlag(['--quick']), { publish: false, args: ['--quick'] });
  assert.deepEqual(splitPublishFlag([]), { publish: false, args: [] });
});

test('the default output directory is ignored by git, docs/bench is not', () => {
  const dataDir = path.join(PROJECT_ROOT, '.data');
  const ignored = (dir: string): boolean => {
    try {
      execFileSync('git', ['check-ignore', '-q', path.join(dir, 'scale.json')], { cwd: PROJECT_ROOT });
      return true;
    } catch {
      return false;
    }
  };
  assert.ok(ignored(benchOutputDir({ publish: false, projectRoot: PROJECT_ROOT, dataDir })));
  assert.ok(!ignored(benchOutputDir({ publish: true, projectRoot: PROJECT_ROOT, dataDir })));
});

test('no benchmark writes docs/bench except through the output helper', async () => {
  const fs = await import('node:fs');
  const benchDir = path.join(PROJECT_ROOT, 'bench');
  const offenders = fs
    .readdirSync(benchDir)
    .filter((f) => f.endsWith('.ts'))
    .filter((f) => /['"]docs['"],\s*['"]bench['"]/.test(fs.readFileSync(path.join(benchDir, f), 'utf8')));
  assert.deepEqual(offenders, [], 'use benchOutDir() from bench/lib/output.ts');
});
