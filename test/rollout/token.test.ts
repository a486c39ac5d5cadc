/** Token resolution (env, file, created default) and the constant-time bearer check; the factories' wiring. */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { bearerMatches, resolvePolicyToken, rolloutPolicyFactories } from '../../rollout';

describe('policy token', () => {
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-token-'));

  it('prefers DARTFLOW_POLICY_TOKEN, then DARTFLOW_POLICY_TOKEN_FILE, and refuses short tokens', () => {
    assert.equal(resolvePolicyToken({ env: { DARTFLOW_POLICY_TOKEN: 'a'.repeat(20) } }), 'a'.repeat(20));
    const file = path.join(tmp(), 't');
    fs.writeFileSync(file, `${'b'.repeat(32)}\n`);
    assert.equal(resolvePolicyToken({ env: { DARTFLOW_POLICY_TOKEN_FILE: file } }), 'b'.repeat(32));
    assert.throws(() => resolvePolicyToken({ env: { DARTFLOW_POLICY_TOKEN: 'short' } }), /too short/);
    assert.throws(() => resolvePolicyToken({ env: {} }), /no policy token/);
  });

  it('creates the default token file once (mode 0600) and every process reads the same token', () => {
    const file = path.join(tmp(), 'sub', 'policy-token');
    const a = resolvePolicyToken({ env: {}, defaultFile: file, create: true });
    const b = resolvePolicyToken({ env: {}, defaultFile: file, create: true });
    assert.equal(a, b);
    assert.ok(a.length >= 32);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  });

  it('bearerMatches accepts exactly "Bearer <token>"', () => {
    const t = 'c'.repeat(24);
    assert.equal(bearerMatches(`Bearer ${t}`, t), true);
    assert.equal(bearerMatches(`bearer ${t}`, t), true);
    assert.equal(bearerMatches(`Bearer ${t}x`, t), false);
    assert.equal(bearerMatches(t, t), false);
    assert.equal(bearerMatches(undefined, t), false);
  });

  it('rolloutPolicyFactories registers the embedded, uitars and uitars-oracle kinds', () => {
    const f = rolloutPolicyFactories({ dataDir: tmp() });
    assert.deepEqual(Object.keys(f).sort(), ['embedded', 'uitars', 'uitars-oracle']);
  });
});
