/**
 * dartflow's VLM Python code under `npm test`: the VLM venv matches the lock, pytest (python/tests: tiny
 * model builder, scorer, trainer, worker), ruff (lint + format) and mypy (strict) pass on python/dartflow_vlm
 * and its tests. Each tool runs in the VLM venv with python/pyproject.toml's settings. pytest and mypy are
 * independent and take minutes each, so they run side by side (mypy is single-threaded). Skips when the venv
 * is not installed.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import { runProcess } from '../helpers/run-process';
import { PYTHON, SKIP_REASON } from './helpers';

const PY_DIR = path.join(PROJECT_ROOT, 'python');
// The VLM package and its tests; python/ also holds other packages with venvs and checks of their own.
const VLM_PATHS = ['dartflow_vlm', 'tests'];

interface Finished {
  ok: boolean;
  output: string;
}

async function run(cmd: string, args: string[], cwd = PY_DIR, timeoutMs = 600_000): Promise<Finished> {
  const env = { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' };
  const r = await runProcess(cmd, args, { cwd, env, timeoutMs });
  return { ok: r.code === 0, output: r.code === 0 ? r.output : `${r.output}\nexited ${r.code ?? 'without a code'}` };
}

describe('Python (python/, VLM venv)', { skip: SKIP_REASON }, () => {
  const py = PYTHON ?? 'python3';
  let pytest: Promise<Finished>;
  let mypy: Promise<Finished>;

  before(() => {
    pytest = run(py, ['-m', 'pytest', '-q'], PY_DIR, 1_200_000);
    mypy = run(py, ['-m', 'mypy']);
  });

  it('the venv matches python/requirements-vlm.lock', async () => {
    const r = await run('bash', [path.join(PROJECT_ROOT, 'infra', 'install-vlm.sh'), '--check'], PROJECT_ROOT, 60_000);
    assert.ok(r.ok, r.output);
  });

  it('pytest python/tests passes', async () => {
    const r = await pytest;
    assert.ok(r.ok, r.output.slice(-5000));
    assert.match(r.output, /\d+ passed/);
  });

  it('ruff: lint and format', async () => {
    const lint = await run(py, ['-m', 'ruff', 'check', ...VLM_PATHS]);
    assert.ok(lint.ok, lint.output);
    const format = await run(py, ['-m', 'ruff', 'format', '--check', ...VLM_PATHS]);
    assert.ok(format.ok, format.output);
  });

  it('mypy --strict', async () => {
    const r = await mypy;
    assert.ok(r.ok, r.output.slice(-5000));
  });
});
