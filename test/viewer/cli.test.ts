/**
 * `npx dartflow viewer` as a user runs it (README, docs/viewer.md): a real child process through npx and
 * the bin script, against the real MinIO and Temporal of the environment. It prints the login URL, the URL
 * logs in (200 and the campaigns page), a request without the token gets 401, SIGTERM to its process group
 * (npx, the shell, the CLI) stops it and frees the port, and nothing but dartflow's own output appears
 * (issue 16.5: no `npm warn Unknown project config` from .npmrc).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import { uniqueSuffix } from '../helpers/infra';

test('npx dartflow viewer prints its URL, serves with the token, refuses without it and stops on SIGTERM', async () => {
  const token = `cli-${uniqueSuffix()}`;
  const child = spawn('npx', ['dartflow', 'viewer', '--port', '0', '--quiet'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, DARTFLOW_VIEWER_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: the test stops exactly what it started (npx and its children) by group id.
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let origin = '';
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no URL within 60 s; stdout: ${stdout} stderr: ${stderr}`)),
        60_000
      );
      const look = () => {
        const m = /dartflow viewer: (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(stdout);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      child.stdout.on('data', look);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`dartflow viewer exited with ${code} before printing its URL; stderr: ${stderr}`));
      });
    });
    assert.ok(url.endsWith(`token=${token}`), url);
    const page = await fetch(url);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<h1>Campaigns/);
    origin = new URL(url).origin;
    assert.equal((await fetch(`${origin}/`)).status, 401, 'no token, no page');
  } finally {
    if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
  }
  await exited; // npx re-raises the signal (exit by SIGTERM); what matters is that the viewer stopped:
  const gone = async () => {
    for (let i = 0; i < 100; i++) {
      if (
        await fetch(origin).then(
          () => false,
          () => true
        )
      )
        return true;
      await new Promise((r) => setTimeout(r, 100));
    }
    return false;
  };
  assert.ok(await gone(), `the viewer at ${origin} stopped after SIGTERM`);
  assert.doesNotMatch(stderr, /npm warn/i, 'npx prints no npm warning (issue 16.5)');
  assert.equal(stderr.trim(), '', 'nothing on stderr');
});
