/**
 * The VLM bench's CPU groups (bench/lib/cpu-cap.ts) on this machine's real cgroup hierarchy: a busy process
 * moved into a 0.2-core group uses at most about that; one moved into a cpuset runs on its CPUs only and
 * gets its own CPU affinity back on release; release() puts it back and removes the group — also when the
 * process that made the groups exits without releasing them.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  autogroupOf,
  createCpuCap,
  createCpuSet,
  niceAutogroups,
  niceThreads,
  onlineCpus,
} from '../../bench/lib/cpu-cap';
import { cpuSeconds, procStatFields } from '../../bench/lib/proc-cpu';
import { PROJECT_ROOT } from '../../infra/settings';

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

/** Each thread's CPU affinity list, CPU time (ticks) and the CPU it last ran on (/proc/<pid>/task/<tid>/{status,stat}). */
function threadCpus(pid: number): Array<{ tid: string; allowed: string; ticks: number; lastRanOn: number }> {
  return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
    const status = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
    return {
      tid,
      allowed: /^Cpus_allowed_list:\s*(\S+)/m.exec(status)![1]!,
      ticks: Number(f[11]) + Number(f[12]), // utime + stime
      lastRanOn: Number(f[36]), // field 39: processor
    };
  });
}

const allowedOf = (pid: number) => [...new Set(threadCpus(pid).map((th) => th.allowed))];

test('a process moved into a cpuset runs on its CPUs only; release gives back its affinity and removes the group', async (t) => {
  const online = onlineCpus();
  if (online.length < 2) {
    t.skip(`one online CPU (${online.join(',')}): nothing to split`);
    return;
  }
  const [first, last] = [online[0]!, online[online.length - 1]!];
  let set;
  try {
    set = createCpuSet(`dartflow-test-set-${process.pid}`, [last]);
  } catch (err) {
    t.skip((err as Error).message); // no writable cpuset controller: the bench skips its own-CPU windows
    return;
  }
  // Two busy threads pinned to the first CPU, as vLLM pins its OpenMP threads at start-up.
  const busy = spawn(
    'taskset',
    [
      '-c',
      String(first),
      process.execPath,
      '-e',
      "const { Worker } = require('node:worker_threads'); new Worker('for (;;) {}', { eval: true }); for (;;) {}",
    ],
    { stdio: 'ignore' }
  );
  try {
    // taskset execs node in place: the PID is node's.
    const pid = busy.pid!;
    await sleep(1000);
    const groupsBefore = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    assert.deepEqual(allowedOf(pid), [String(first)]);
    set.add([pid, 999_999_999]); // a PID that is gone is skipped
    assert.deepEqual(allowedOf(pid), [String(last)], "every thread may run on the set's CPU only");
    const before = new Map(threadCpus(pid).map((th) => [th.tid, th.ticks]));
    await sleep(1500);
    // The threads that ran since (the two busy ones at least) ran there.
    const ran = threadCpus(pid).filter((th) => th.ticks > (before.get(th.tid) ?? 0));
    assert.ok(ran.length >= 2, `${ran.length} threads ran`);
    assert.deepEqual([...new Set(ran.map((th) => th.lastRanOn))], [last], 'and ran there');
    // Overwrite the threads' affinity inside the set, as moving into a cpuset does on kernels before 6.2 (later
    // ones keep the affinity a thread asked for and re-apply it on the way out — which would hide a missing
    // restore): release() must still give them their own.
    execFileSync('taskset', ['-apc', String(last), String(pid)], { stdio: 'ignore' });
    set.release();
    assert.equal(fs.existsSync(set.path), false, 'the group is removed');
    assert.equal(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'), groupsBefore, 'back where it was');
    assert.deepEqual(allowedOf(pid), [String(first)], 'its own affinity back');
  } finally {
    busy.kill('SIGKILL');
    if (fs.existsSync(set.path)) set.release();
  }
});

test('a cpuset of CPUs the machine does not have is refused with the ones it has', () => {
  assert.throws(
    () => createCpuSet('dartflow-test-set-bad', [999]),
    /cpus must be some of the online CPUs .*got \[999\]/
  );
  assert.throws(() => createCpuSet('dartflow-test-set-empty', []), /got \[\]/);
});

test('groups a process made are released when it exits without releasing them (an error, SIGTERM → process.exit)', async (t) => {
  const online = onlineCpus();
  const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
  let held: string[] = [];
  try {
    const pid = sleeper.pid!;
    const groupsBefore = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    const affinityBefore = allowedOf(pid);
    // A bench stand-in: holds the sleeper in a quota and a cpuset, then exits with an error mid-"window".
    const script = `
      const { createCpuCap, createCpuSet } = require(${JSON.stringify(path.join(PROJECT_ROOT, 'bench/lib/cpu-cap.ts'))});
      let cap, set;
      try {
        cap = createCpuCap('dartflow-test-exit-cap-' + process.pid, 0.5);
        set = createCpuSet('dartflow-test-exit-set-' + process.pid, [${online[online.length - 1]}]);
      } catch (err) {
        console.log('SKIP ' + err.message);
        process.exit(0);
      }
      cap.add([${pid}]);
      set.add([${pid}]);
      console.log('HELD ' + cap.path + ' ' + set.path);
      throw new Error('the window failed');
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    });
    const out = r.stdout.trim();
    if (out.startsWith('SKIP')) {
      t.skip(out.slice(5));
      return;
    }
    assert.match(out, /^HELD /, `the child held the sleeper: ${out} ${r.stderr.slice(-500)}`);
    assert.notEqual(r.status, 0, 'the child failed');
    held = out.slice(5).split(' ');
    for (const dir of held) assert.equal(fs.existsSync(dir), false, `${dir} removed on exit`);
    assert.equal(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'), groupsBefore, 'the sleeper is back where it was');
    assert.deepEqual(allowedOf(pid), affinityBefore, 'with its own affinity');
  } finally {
    sleeper.kill('SIGKILL');
    await new Promise((r) => sleeper.once('exit', r));
    for (const dir of held.filter((d) => fs.existsSync(d))) fs.rmdirSync(dir); // only after a failure
  }
});

test('a group left by a process killed outright is removed by the next one, its processes back in the root group', async (t) => {
  // A PID that is gone: a process that has exited.
  const gone = spawn('true');
  await new Promise((r) => gone.once('exit', r));
  const root = '/sys/fs/cgroup/cpuset';
  if (!fs.existsSync(path.join(root, 'cpuset.cpus'))) {
    t.skip('no cgroup v1 cpuset hierarchy to plant an orphan in');
    return;
  }
  const orphan = path.join(root, `dartflow-test-orphan-${gone.pid}`);
  const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
  try {
    const pid = sleeper.pid!;
    try {
      fs.mkdirSync(orphan);
      fs.writeFileSync(path.join(orphan, 'cpuset.cpus'), String(onlineCpus()[0]));
      fs.writeFileSync(
        path.join(orphan, 'cpuset.mems'),
        fs.readFileSync(path.join(root, 'cpuset.mems'), 'utf8').trim()
      );
      fs.writeFileSync(path.join(orphan, 'cgroup.procs'), String(pid));
    } catch (err) {
      t.skip(`cannot make a cpuset here: ${(err as Error).message}`);
      return;
    }
    const set = createCpuSet(`dartflow-test-sweeper-${process.pid}`, [onlineCpus()[0]!]);
    set.release();
    assert.equal(fs.existsSync(orphan), false, 'the orphan group is gone');
    assert.match(
      fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'),
      /^\d+:cpuset:\/$/m,
      'its process is in the root cpuset'
    );
  } finally {
    sleeper.kill('SIGKILL');
    await new Promise((r) => sleeper.once('exit', r));
    if (fs.existsSync(orphan)) fs.rmdirSync(orphan);
  }
});

/** Each thread's niceness (/proc/<pid>/task/<tid>/stat field 19). */
const threadNices = (pid: number) =>
  fs.readdirSync(`/proc/${pid}/task`).map((tid) => Number(procStatFields(`/proc/${pid}/task/${tid}/stat`)[16]));

test('niceThreads sets every thread of a process, which setpriority on its PID does not', async () => {
  // A process with a worker thread (and libuv's pool): several threads started before anyone renices it.
  const child = spawn(
    process.execPath,
    [
      '-e',
      "const { Worker } = require('node:worker_threads'); new Worker('setInterval(() => {}, 1000)', { eval: true }); setInterval(() => {}, 1000);",
    ],
    { stdio: 'ignore' }
  );
  try {
    const pid = child.pid!;
    for (let i = 0; i < 50 && threadNices(pid).length < 3; i++) await sleep(100);
    assert.ok(threadNices(pid).length >= 3, `threads: ${threadNices(pid).length}`);
    os.setPriority(pid, 3);
    assert.ok(
      threadNices(pid).some((n) => n !== 3),
      `setpriority(pid) leaves the other threads as they were: ${threadNices(pid).join(',')}`
    );
    const set = niceThreads([pid, 999_999_999], 7); // a PID that is gone is skipped
    assert.equal(set, threadNices(pid).length);
    assert.deepEqual([...new Set(threadNices(pid))], [7]);
  } finally {
    child.kill('SIGKILL');
  }
  assert.throws(() => niceThreads([process.pid], 20), /niceness 20: give an integer from -20/);
});

test("niceAutogroups sets a session's autogroup that holds only the given processes, and leaves a shared one", async (t) => {
  if (!autogroupOf(process.pid)) {
    t.skip('no autogroups on this kernel (/proc/<pid>/autogroup)');
    return;
  }
  // detached: a session, so an autogroup, of its own.
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { detached: true, stdio: 'ignore' });
  try {
    const pid = child.pid!;
    for (let i = 0; i < 20 && autogroupOf(pid)?.id === autogroupOf(process.pid)?.id; i++) await sleep(50);
    const own = autogroupOf(pid)!;
    assert.notEqual(own.id, autogroupOf(process.pid)!.id, 'the detached child leads its own session');
    assert.deepEqual(niceAutogroups([pid], 5), { changed: [own.id], shared: [] });
    assert.equal(autogroupOf(pid)!.nice, 5);
    // This process's session holds the test runner too: not changed, only reported.
    const mine = autogroupOf(process.pid)!;
    assert.deepEqual(niceAutogroups([process.pid], 5), { changed: [], shared: [mine.id] });
    assert.equal(autogroupOf(process.pid)!.nice, mine.nice);
  } finally {
    child.kill('SIGKILL');
  }
});
