/**
 * Which ancestors of `dartflow workers` are wrappers it must not outlive (npx → sh -c → CLI), and when
 * that chain counts as broken. Pure logic on process records shaped like /proc's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chainIntact, isPackageRunner, wrapperChain, type ProcInfo } from '../../cli/stop-request';

const npm: ProcInfo = { pid: 100, ppid: 10, argv: ['npm exec dartflow workers'] };
const sh: ProcInfo = { pid: 200, ppid: 100, argv: ['sh', '-c', "'dartflow' workers"] };
const bash: ProcInfo = { pid: 10, ppid: 1, argv: ['-bash'] };

test('npm and npx are package runners in every spelling /proc shows; shells and node scripts are not', () => {
  assert.ok(isPackageRunner(['npm exec dartflow workers']), 'npm rewrites its title into one argument');
  assert.ok(isPackageRunner(['npm', 'run', 'x']));
  assert.ok(isPackageRunner(['/usr/bin/node', '/usr/lib/node_modules/npm/bin/npx-cli.js', 'dartflow']));
  assert.ok(!isPackageRunner(['-bash']));
  assert.ok(!isPackageRunner(['/usr/bin/node', '/work/main/bin/dartflow.js', 'workers']));
  assert.ok(!isPackageRunner(['nohup']));
});

test('the wrapper chain runs from the parent up to npm through pass-through layers only', () => {
  assert.deepEqual(wrapperChain([sh, npm, bash]), [sh, npm]);
  assert.deepEqual(wrapperChain([npm, bash]), [npm]);
  const tsx: ProcInfo = { pid: 300, ppid: 200, argv: ['node', '/work/main/node_modules/.bin/tsx', 'cli/main.ts'] };
  assert.deepEqual(wrapperChain([tsx, sh, npm, bash]), [tsx, sh, npm]);
  assert.deepEqual(wrapperChain([bash]), [], 'started from a shell: only signals stop it (nohup keeps working)');
  assert.deepEqual(wrapperChain([sh, bash]), [], 'sh -c without npm above it is not a wrapper to follow');
  assert.deepEqual(wrapperChain([]), []);
});

test('the chain is broken when a wrapper dies or is re-parented, but npm itself may be re-parented', () => {
  const chain = [sh, npm];
  const ppids = new Map<number, number | undefined>([
    [200, 100],
    [100, 10],
  ]);
  const ppidOf = (pid: number) => ppids.get(pid);
  assert.ok(chainIntact(200, chain, ppidOf));
  assert.ok(!chainIntact(1, chain, ppidOf), 'sh died: the CLI was re-parented');
  ppids.set(100, 1);
  assert.ok(chainIntact(200, chain, ppidOf), 'nohup npx …: npm outlived its shell, nothing to stop');
  ppids.set(100, undefined);
  assert.ok(!chainIntact(200, chain, ppidOf), 'npm was killed (-9): sh lingers, the CLI must stop');
  ppids.set(100, 10);
  ppids.set(200, 1);
  assert.ok(!chainIntact(200, chain, ppidOf), 'sh re-parented: npm is gone');
  assert.ok(chainIntact(4242, [], ppidOf), 'no wrappers: nothing to watch');
});
