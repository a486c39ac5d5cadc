/**
 * The VLM bench's CPU cap (bench/lib/cpu-cap.ts) on this machine's real cgroup hierarchy: a busy process
 * moved into a 0.2-core group uses at most about that, and release() puts it back and removes the group.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import { createCpuCap } from '../../bench/lib/cpu-cap';
import { cpuSeconds } from '../../bench/lib/proc-cpu';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a busy process held to 0.2 cores uses at most about that; release puts it back and removes the group', async (t) => {
  let cap;
  try {
    cap = createCpuCap(`dartflow-test-cap-${process.pid}`, 0.2);
  } catch (err) {
    // Only where the machine has no writable cgroup CPU controller (the bench then skips its capped windows).
    t.skip((err as Error).message);
    return;
  }
  const busy = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  try {
    const pid = busy.pid!;
    const groupsBefore = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    cap.add([pid, 999_999_999]); // a PID that is gone is skipped
    assert.match(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'), /dartflow-test-cap/);
    const before = cpuSeconds(pid)!;
    const startedAt = Date.now();
    await sleep(3000);
    const cores = (cpuSeconds(pid)! - before) / ((Date.now() - startedAt) / 1000);
    // The quota allows 0.2 cores per 20-ms period; the tick-based CPU reading adds a little.
    assert.ok(cores <= 0.3, `capped process used ${cores.toFixed(2)} cores`);
    assert.ok(cores > 0.05, `capped process still ran (${cores.toFixed(2)} cores)`);
    cap.release();
    assert.equal(fs.existsSync(cap.path), false, 'the group is removed');
    assert.equal(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'), groupsBefore, 'back where it was');
  } finally {
    busy.kill('SIGKILL');
    if (fs.existsSync(cap.path)) cap.release();
  }
});

test('a cap of no cores is refused with the reason', () => {
  assert.throws(() => createCpuCap('dartflow-test-cap-zero', 0), /cores must be > 0, got 0/);
});
