/**
 * `npm run bench` leaves the machine as it found it: servers it had to start (here: a private Temporal dev
 * server and MinIO on free ports under a scratch data dir) are stopped at the end, servers that were
 * already running keep running, and results land in the data dir, not in the tracked docs/bench.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { minioHealthy, temporalHealthy } from '../../infra/services';
import { PROJECT_ROOT } from '../../infra/settings';
import { freePort, testSettings } from '../helpers/infra';

function bench(env: NodeJS.ProcessEnv): { out: string; status: number | null } {
  // `charts` is the quickest suite: it only redraws charts from JSON already in the output directory.
  const r = spawnSync('npm', ['run', '-s', 'bench', '--', 'charts'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 240_000,
  });
  return { out: `${r.stdout}${r.stderr}`, status: r.status };
}

const docsBenchStatus = () =>
  spawnSync('git', ['status', '--porcelain', '--', 'docs/bench'], { cwd: PROJECT_ROOT, encoding: 'utf8' }).stdout;

/** Live processes whose command line mentions `marker` (the servers' data folders are under it). */
function processesMentioning(marker: string): string[] {
  return fs
    .readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .flatMap((e) => {
      try {
        const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').replace(/\0/g, ' ');
        return cmd.includes(marker) ? [`${e} ${cmd.slice(0, 120)}`] : [];
      } catch {
        return [];
      }
    });
}

test('servers a bench run started are stopped at the end; results go to <dataDir>/bench', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-bench-infra-'));
  try {
    const docsBefore = docsBenchStatus();
    const r = bench({
      DARTFLOW_DATA_DIR: dataDir,
      DARTFLOW_TEMPORAL_PORT: String(await freePort()),
      DARTFLOW_TEMPORAL_UI_PORT: String(await freePort()),
      DARTFLOW_MINIO_PORT: String(await freePort()),
      DARTFLOW_MINIO_CONSOLE_PORT: String(await freePort()),
    });
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /\[infra\] temporal: started/);
    assert.match(r.out, /\[infra\] minio: started/);
    assert.ok(r.out.includes(`[bench] results in ${path.join(dataDir, 'bench')}`), r.out);
    assert.match(r.out, /\[bench\] stopped the servers this run started: temporal, minio/);
    assert.deepEqual(processesMentioning(dataDir), [], 'no server of the run is left');
    assert.equal(docsBenchStatus(), docsBefore, 'docs/bench is untouched without --publish');
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

test('servers that were already running keep running after a bench run', async () => {
  const settings = testSettings();
  const r = bench({});
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /\[infra\] temporal: reused/);
  assert.doesNotMatch(r.out, /stopped the servers/);
  assert.ok(await temporalHealthy(settings.temporal.address), 'the shared Temporal dev server still answers');
  assert.ok(await minioHealthy(settings.s3.endpoint), 'the shared MinIO still answers');
});
