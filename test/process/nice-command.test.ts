/**
 * A nice role stays nice, Chromium included (cli/nice-command.ts): a real Chromium started through
 * niceCommand has no thread below the niceness given — as root too, where Chromium would otherwise lower its
 * own threads' niceness (to 0 and -8) with CAP_SYS_NICE.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import { niceCommand, niceCommandContext, onPath } from '../../cli/nice-command';
import { procStatFields } from '../../bench/lib/proc-cpu';
import { CHROMIUM_ARGS } from '../../envs/browser/host';
import { loadInfraSettings } from '../../infra/settings';
import { processTree } from '../../infra/vllm';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The niceness of every thread of `root` and its descendants (/proc/<pid>/task/<tid>/stat field 19). */
function treeNices(root: number): number[] {
  return processTree(root).flatMap((pid) => {
    try {
      return fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
        try {
          return [Number(procStatFields(`/proc/${pid}/task/${tid}/stat`)[16])];
        } catch {
          return []; // gone
        }
      });
    } catch {
      return [];
    }
  });
}

/** Starts Chromium with `command` before its arguments, waits until its renderer is up, returns its threads' niceness. */
async function chromiumNices(prefix: (cmd: string[]) => string[]): Promise<number[]> {
  const chromium = loadInfraSettings().chromiumPath ?? '/usr/bin/chromium';
  const [file, ...args] = prefix([chromium, ...CHROMIUM_ARGS, '--remote-debugging-port=0', 'about:blank']);
  const child = spawn(file!, args, { stdio: 'ignore' });
  try {
    // Its browser, zygotes, GPU, network and renderer processes: wait for the thread count to settle.
    let nices: number[] = [];
    for (let i = 0, last = -1; i < 60; i++) {
      await sleep(250);
      nices = treeNices(child.pid!);
      if (nices.length > 40 && nices.length === last) break;
      last = nices.length;
    }
    assert.ok(nices.length > 20, `Chromium started (${nices.length} threads)`);
    return nices;
  } finally {
    child.kill('SIGKILL');
  }
}

test('a Chromium started at niceness 10 through niceCommand has every thread at 10 or later', async () => {
  const nices = await chromiumNices((cmd) => niceCommand(10, cmd, niceCommandContext()));
  assert.deepEqual(
    nices.filter((n) => n < 10),
    [],
    `threads below nice 10: ${nices.filter((n) => n < 10).length} of ${nices.length}`
  );
});

test('as root, plain `nice -n 10` does not hold for Chromium: why niceCommand drops CAP_SYS_NICE', async (t) => {
  if (process.getuid?.() !== 0) {
    t.skip('not root: Chromium cannot lower its niceness (RLIMIT_NICE), plain nice holds');
    return;
  }
  const nices = await chromiumNices((cmd) => ['nice', '-n', '10', ...cmd]);
  assert.ok(
    nices.some((n) => n < 10),
    `Chromium lowered some threads below 10 itself: ${[...new Set(nices)].join(', ')}`
  );
});

test('niceCommand: nice alone for other users, setpriv as root, refused where it cannot hold', () => {
  const cmd = ['node', 'worker.js'];
  assert.deepEqual(niceCommand(10, cmd, { root: false, setpriv: undefined }), [
    'nice',
    '-n',
    '10',
    'node',
    'worker.js',
  ]);
  assert.deepEqual(niceCommand(10, cmd, { root: true, setpriv: '/usr/bin/setpriv' }), [
    '/usr/bin/setpriv',
    '--bounding-set=-sys_nice',
    '--inh-caps=-sys_nice',
    'nice',
    '-n',
    '10',
    'node',
    'worker.js',
  ]);
  assert.deepEqual(niceCommand(0, cmd, { root: true, setpriv: undefined }), cmd, '0 is normal: unchanged');
  assert.throws(() => niceCommand(10, cmd, { root: true, setpriv: undefined }), /needs setpriv \(util-linux/);
  assert.throws(() => niceCommand(-5, cmd, { root: false, setpriv: undefined }), /niceness -5: give an integer from 0/);
  assert.throws(() => niceCommand(20, cmd, { root: false, setpriv: undefined }), /niceness 20/);
  assert.equal(onPath('sh', '/nonexistent:/bin'), '/bin/sh');
  assert.equal(onPath('no-such-tool-here', '/bin'), undefined);
});
