/**
 * dartflow's VLM Python code under `npm test`: the VLM venv matches the lock, pytest (python/tests: tiny
 * model builder, scorer), ruff (lint + format) and mypy (strict) pass on python/dartflow_vlm and its tests. Each tool runs in the VLM venv
 * with python/pyproject.toml's settings. Skips when the venv is not installed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import { PYTHON, SKIP_REASON } from './helpers';

const PY_DIR = path.join(PROJECT_ROOT, 'python');
// The VLM package and its tests; python/ also holds other packages with venvs and checks of their own.
const VLM_PATHS = ['dartflow_vlm', 'tests'];

function run(cmd: string, args: string[], cwd = PY_DIR, timeoutMs = 600_000): { ok: boolean; output: string } {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
  });
  const output = `${r.stdout}${r.stderr}${r.error ? String(r.error) : ''}`;
  return { ok: r.status === 0, output };
}

describe('Python (python/, VLM venv)', { skip: SKIP_REASON }, () => {
  const py = PYTHON ?? 'python3';

  it('the venv matches python/requirements-vlm.lock', () => {
    const r = run('bash', [path.join(PROJECT_ROOT, 'infra', 'install-vlm.sh'), '--check'], PROJECT_ROOT, 30_000);
    assert.ok(r.ok, r.output);
  });

  it('pytest python/tests passes', () => {
    const r = run(py, ['-m', 'pytest', '-q'], PY_DIR, 1_200_000);
    assert.ok(r.ok, r.output.slice(-5000));
    assert.match(r.output, /\d+ passed/);
  });

  it('ruff: lint and format', () => {
    const lint = run(py, ['-m', 'ruff', 'check', ...VLM_PATHS]);
    assert.ok(lint.ok, lint.output);
    const format = run(py, ['-m', 'ruff', 'format', '--check', ...VLM_PATHS]);
    assert.ok(format.ok, format.output);
  });

  it('mypy --strict', () => {
    const r = run(py, ['-m', 'mypy']);
    assert.ok(r.ok, r.output.slice(-5000));
  });
});
