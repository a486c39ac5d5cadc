/**
 * A newcomer's first commands print only dartflow's own output: no "npm warn Unknown project config"
 * (a custom key in .npmrc), while onnxruntime-node's postinstall — which downloads the CUDA provider on
 * linux/x64 — still never runs at install time.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import { legacyPolicySpec } from '../../policy/spec';

function run(command: string, args: string[]): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(command, args, { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 120_000 });
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

test('`npx dartflow --help` prints the usage and no npm warning', () => {
  const r = run('npx', ['--no-install', 'dartflow', '--help']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^usage: dartflow <command>/);
  assert.doesNotMatch(r.stderr, /npm warn/i);
  assert.equal(r.stderr, '');
});

test('npm reads the project config without warnings (what `npm start` and `npm test` load first)', () => {
  const r = run('npm', ['run']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /\bstart\b[\s\S]*\btest\b/, 'the scripts are listed');
  assert.doesNotMatch(r.stderr, /npm warn/i);
});

test('dependency install scripts stay off, so `npm ci` never fetches the CUDA build of onnxruntime-node', () => {
  const r = run('npm', ['config', 'get', 'ignore-scripts']);
  assert.equal(r.stdout.trim(), 'true');
  assert.doesNotMatch(r.stderr, /npm warn/i);
});

test('`dartflow workers --env-kind osworld` without its variables stops before starting anything, naming the variable', () => {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('DARTFLOW_OSWORLD_') || k === 'DARTFLOW_ENV_URL') delete env[k];
  const cli = (kind: string) =>
    spawnSync(process.execPath, ['bin/dartflow.js', 'workers', '--roles', 'env', '--env-kind', kind], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      env,
    });
  const osworld = cli('osworld');
  assert.notEqual(osworld.status, 0);
  assert.match(osworld.stderr, /DARTFLOW_OSWORLD_ENV_SERVERS must be set/);
  assert.doesNotMatch(osworld.stdout, /running /, 'no role was started');
  const remote = cli('remote');
  assert.notEqual(remote.status, 0);
  assert.match(remote.stderr, /DARTFLOW_ENV_URL must be set/);
  assert.match(cli('vm').stderr, /--env-kind must be browser, simulated, remote, osworld, got "vm"/);
});

test('`dartflow workers` takes the env kind from DARTFLOW_ENV_KIND when --env-kind is not given', () => {
  const env: NodeJS.ProcessEnv = { ...process.env, DARTFLOW_ENV_KIND: 'osworld' };
  for (const k of Object.keys(env)) if (k.startsWith('DARTFLOW_OSWORLD_')) delete env[k];
  const r = spawnSync(process.execPath, ['bin/dartflow.js', 'workers', '--roles', 'env'], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env,
  });
  assert.notEqual(r.status, 0);
  assert.match(
    r.stderr,
    /DARTFLOW_OSWORLD_ENV_SERVERS must be set/,
    'an osworld worker was asked for, not a browser one'
  );
});

test('`dartflow workers --spec-file` refuses a missing or invalid policy spec before starting anything', () => {
  const cli = (file: string) =>
    spawnSync(process.execPath, ['bin/dartflow.js', 'workers', '--roles', 'policy', '--spec-file', file], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      timeout: 120_000,
    });
  const missing = cli('/nonexistent/spec.json');
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /--spec-file \/nonexistent\/spec\.json: not a policy spec \(ENOENT/);
  assert.doesNotMatch(missing.stdout, /running /, 'no role was started');
  // A spec that asks for the max context without the click context it adds to.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'spec-file-'));
  const bad = path.join(dir, 'spec.json');
  fs.writeFileSync(bad, JSON.stringify({ ...legacyPolicySpec, clickMaxContext: true }));
  const invalid = cli(bad);
  assert.notEqual(invalid.status, 0);
  assert.match(invalid.stderr, /not a policy spec \(policy spec: clickMaxContext adds to the click context/);
  fs.rmSync(dir, { recursive: true, force: true });
});
