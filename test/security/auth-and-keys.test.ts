/**
 * (b) The env server answers nothing without its bearer token and binds loopback by default, and its CLI
 * refuses to start without a token (the policy server's 401s and loopback bind are covered in
 * test/rollout/policy-server.test.ts). (c) Object keys built from ids that come from task files or users
 * cannot leave their prefix: traversal, encoded traversal, absolute paths, NUL and very long ids are
 * refused or neutralized.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { EnvServer } from '../../envs/remote-server';
import { SIM_PROFILES, SimulatedEnvPool } from '../../envs/simulated';
import { PROJECT_ROOT } from '../../infra/settings';
import { keys, registryKeys, safeSegment } from '../../storage/keys';

const TOKEN = `env-token-${Math.random().toString(36).slice(2)}`;
let pool: SimulatedEnvPool;
let server: EnvServer;
let url: string;

before(async () => {
  pool = new SimulatedEnvPool({ slots: 1, profile: SIM_PROFILES.fast! });
  server = new EnvServer({ pool, token: TOKEN });
  ({ url } = await server.listen());
});
after(async () => {
  await server.close();
  await pool.close();
});

test('env server: 127.0.0.1 by default; every endpoint is 401 without or with a wrong token', async () => {
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const endpoints: Array<[string, string]> = [
    ['GET', '/v1/health'],
    ['POST', '/v1/envs'],
    ['POST', '/v1/envs/env-1/reset'],
    ['POST', '/v1/envs/env-1/step'],
    ['GET', '/v1/envs/env-1/observation'],
    ['POST', '/v1/envs/env-1/evaluate'],
    ['DELETE', '/v1/envs/env-1'],
  ];
  for (const [method, p] of endpoints) {
    for (const auth of [undefined, 'Bearer wrong-token-wrong', `Basic ${TOKEN}`, TOKEN]) {
      const res = await fetch(`${url}${p}`, {
        method,
        headers: auth ? { authorization: auth } : {},
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      assert.equal(res.status, 401, `${method} ${p} with ${auth ?? 'no'} authorization`);
    }
  }
  assert.equal(pool.stats().busy, 0, 'no env was leased by an unauthenticated call');
  const ok = await fetch(`${url}/v1/health`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(ok.status, 200);
});

test('env server CLI refuses to start without a token', () => {
  const env = { ...process.env };
  delete env.DARTFLOW_ENV_SERVER_TOKEN;
  delete env.DARTFLOW_ENV_SERVER_TOKEN_FILE;
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'envs/remote-server.ts')], {
    cwd: PROJECT_ROOT,
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /never runs without authentication/);
});

const SAFE_SEGMENT = /^[A-Za-z0-9._=-]{1,200}$/;

test('ids cannot escape their key prefix: traversal, encoded, absolute, NUL, separators, very long', () => {
  const hostile = [
    '../../etc/passwd',
    '../',
    '..%2f..%2fsecrets',
    '%2e%2e',
    '%2e%2e%2f%2e%2e%2f',
    '/etc/passwd',
    '/',
    'C:\\Windows\\system32',
    '..\\..\\x',
    'a\0b',
    '\0',
    'x/../../../y',
    'ok/./.',
    '．．／',
    '..\u2215..',
    'a'.repeat(10_000),
    `${'../'.repeat(500)}x`,
    ' ',
    'campaigns/other/trajectories/t',
  ];
  for (const id of hostile) {
    const seg = safeSegment(id);
    assert.match(seg, SAFE_SEGMENT, JSON.stringify(id.slice(0, 40)));
    assert.ok(!/^\.+$/.test(seg), `${JSON.stringify(id.slice(0, 40))} → dots only`);
    const key = keys.trajectoryManifest('c1', id);
    const parts = key.split('/');
    assert.equal(parts.length, 5, key.slice(0, 80));
    assert.deepEqual(parts.slice(0, 3), ['campaigns', 'c1', 'trajectories']);
    assert.ok(!parts.includes('..') && !parts.includes('.') && !parts.includes(''), key.slice(0, 80));
    assert.ok(!key.includes('\0'));
    const pool = keys.poolEntry(id, id, id);
    assert.equal(pool.split('/').length, 5);
    assert.ok(registryKeys.policyServer(id).startsWith('registry/policy-servers/'));
  }
  // dots-only and empty ids are refused outright, naming what they are
  for (const id of ['.', '..', '...', '']) assert.throws(() => safeSegment(id, 'taskId'), /taskId/);
  assert.throws(() => keys.poolEntry('c1', '..', 't1'), /taskId "\.\." is not a valid key segment/);
  assert.throws(() => keys.trajectoryManifest('..', 't1'), /campaignId/);
  assert.equal(safeSegment('a'.repeat(10_000)).length, 200, 'bounded length');
});
