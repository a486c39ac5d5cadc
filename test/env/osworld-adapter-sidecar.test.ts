/**
 * OSWorld's own evaluators through the real sidecar (python -m dartflow_osworld, desktop-env's getters
 * and metric functions) for VMs leased by the `osworld` env from the loopback GUI-Docker-Env fake, whose
 * VMs serve files from a local folder. Also runs the sidecar's pytest suite and ruff. Skips when
 * .tools/osworld-venv is absent (bash infra/install-osworld.sh).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runEpisodeCore } from '../../activities/env/run-episode';
import type { PolicyFactory } from '../../activities/env/policy';
import { TaskConfigError } from '../../envs/errors';
import { OsworldEnvPool, OsworldEvaluatorError, type OsworldEnvOptions } from '../../envs/osworld';
import {
  OSWORLD_PYTHON,
  osworldVenvMissing,
  startSidecar,
  type SidecarProcess,
} from '../../envs/osworld/sidecar-process';
import { PROJECT_ROOT } from '../../infra/settings';
import { TrajectoryManifestSchema } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { parseTaskSpec } from '../../tasks';
import { throwawayStore } from './helpers';
import { FakeEnvServer } from './osworld-adapter-fake';

const SKIP = osworldVenvMissing();
const PY_DIR = path.join(PROJECT_ROOT, 'python');

function run(args: string[]): { ok: boolean; output: string } {
  const r = spawnSync(OSWORLD_PYTHON, args, { cwd: PY_DIR, encoding: 'utf8', timeout: 300_000 });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}${r.error ? String(r.error) : ''}` };
}

const task = (id: string, evaluator: Record<string, unknown>) =>
  parseTaskSpec(
    {
      id,
      snapshot: 'vs_code',
      instruction: 'Save the file.',
      source: 'test',
      config: [{ type: 'launch', parameters: { command: ['code', '/home/user/out.txt'] } }],
      evaluator,
    },
    'osworld-adapter-sidecar.test.ts'
  );
const vmFile = (name: string) => ({ type: 'vm_file', path: `/home/user/${name}`, dest: name });

describe('OSWorld evaluators through the sidecar', { skip: SKIP }, () => {
  let store: ObjectStore;
  let drop: () => Promise<void>;
  let sidecar: SidecarProcess;
  let server: FakeEnvServer;
  let pool: OsworldEnvPool;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'osworld-sidecar-'));
  const vmRoot = path.join(tmp, 'vm');

  before(async () => {
    fs.mkdirSync(path.join(vmRoot, 'home', 'user'), { recursive: true });
    fs.writeFileSync(path.join(vmRoot, 'home/user/out.txt'), 'def f():\n\treturn  1\n');
    fs.writeFileSync(path.join(vmRoot, 'home/user/gold.txt'), 'def f(): return 1');
    ({ store, drop } = await throwawayStore('test-osworld-sidecar-'));
    sidecar = await startSidecar({
      cacheDir: path.join(tmp, 'cache'),
      args: ['--retry-interval', '0.05', '--probe-timeout', '2'],
    });
    server = await new FakeEnvServer({ token: 'dart', limit: 1, fileRoot: vmRoot }).start();
    const opts: OsworldEnvOptions = {
      envServerUrls: [server.url],
      token: 'dart',
      sidecarUrl: sidecar.url,
      pauseMs: 0,
      settleMs: 0,
      initAttempts: 1,
    };
    pool = new OsworldEnvPool({ slots: 1, ...opts });
  });
  after(async () => {
    await pool?.close();
    server?.close();
    await sidecar?.stop();
    await drop?.();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const finish: PolicyFactory = () => ({
    act: async () => ({
      action: { type: 'finished' },
      actionText: 'finished()',
      logProb: 0,
      entropy: 0,
      policyVersion: 0,
    }),
  });

  async function episode(t: ReturnType<typeof task>) {
    const trajectoryId = `t-${Math.random().toString(36).slice(2, 10)}`;
    const res = runEpisodeCore(
      { pool, store, policies: { finish } },
      { campaignId: 'osw', groupId: 'g', trajectoryId, task: t, seed: 1, policy: { kind: 'finish' } },
      { heartbeat: () => undefined, attempt: 1 }
    );
    return {
      res,
      manifest: () =>
        store.getJson(`campaigns/osw/trajectories/${trajectoryId}/manifest.json`, TrajectoryManifestSchema),
    };
  }

  it('pytest python/tests_osworld, ruff and mypy --strict pass in the sidecar venv', () => {
    const py = run(['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests_osworld']);
    assert.ok(py.ok, py.output.slice(-5000));
    assert.match(py.output, /\d+ passed/);
    const lint = run(['-m', 'ruff', 'check', 'dartflow_osworld', 'tests_osworld']);
    assert.ok(lint.ok, lint.output);
    const format = run(['-m', 'ruff', 'format', '--check', 'dartflow_osworld', 'tests_osworld']);
    assert.ok(format.ok, format.output);
    const types = run([
      '-m',
      'mypy',
      '--strict',
      '--ignore-missing-imports',
      '--cache-dir',
      '../.tools/cache/mypy-osworld',
      'dartflow_osworld',
      'tests_osworld',
    ]);
    assert.ok(types.ok, types.output.slice(-5000));
  });

  it('compare_text_file with options decides the reward; the VMs are released', async () => {
    const strict = task('vs_code.t1', {
      func: 'compare_text_file',
      result: vmFile('out.txt'),
      expected: vmFile('gold.txt'),
    });
    const r0 = await (await episode(strict)).res;
    assert.equal(r0.status, 'ok');
    assert.equal(r0.reward, 0);
    const lenient = task('vs_code.t2', { ...strict.evaluator, options: { ignore_blanks: true } });
    const r1 = await (await episode(lenient)).res;
    assert.equal(r1.reward, 1);
    assert.deepEqual(server.deleted, ['emu-0', 'emu-1']);
    assert.equal(server.current, 0);
  });

  it('a list func with conj', async () => {
    const t = task('vs_code.t3', {
      func: ['compare_text_file', 'exact_match'],
      conj: 'or',
      result: [vmFile('out.txt'), { type: 'rule', rules: 'x' }],
      expected: [vmFile('gold.txt'), { type: 'rule', rules: { expected: 'x' } }],
    });
    assert.equal((await (await episode(t)).res).reward, 1);
    const and = task('vs_code.t4', { ...t.evaluator, conj: 'and' });
    assert.equal((await (await episode(and)).res).reward, 0);
  });

  it('an evaluator that raises is an infrastructure failure naming task and field; unsupported is a task error', async () => {
    const raising = task('vs_code.t5', {
      func: 'literal_match',
      result: { type: 'rule', rules: 'a' },
      expected: { type: 'rule', rules: 'a' },
      options: { type: 'dict' },
    });
    const e = await episode(raising);
    await assert.rejects(e.res, (err: Error & { type?: string }) => {
      assert.equal(err.type, OsworldEvaluatorError.name);
      assert.match(
        err.message,
        /task vs_code\.t5, field evaluator\.func .*metric literal_match raised NotImplementedError/
      );
      return true;
    });
    const m = await e.manifest();
    assert.equal(m.reward, null);
    assert.equal(m.status, 'env_error');
    const unsupported = task('vs_code.t6', {
      func: 'compare_docx_files',
      result: vmFile('a.docx'),
      expected: vmFile('b.docx'),
    });
    await assert.rejects((await episode(unsupported)).res, (err: Error & { type?: string }) => {
      assert.equal(err.type, TaskConfigError.name);
      assert.match(err.message, /compare_docx_files.*metrics\.docs/);
      return true;
    });
    assert.equal(server.current, 0, 'every VM released');
  });
});
