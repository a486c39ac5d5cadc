/**
 * `dartflow workers --roles trainer-vlm` (cli/local-workers.ts): the Python VLM trainer runs as a local
 * child on the `trainer-vlm` queue (TASK_QUEUES.trainerVlm), logs to its file and stops on SIGTERM; without
 * a base model the role is refused naming the flag. `vlmWorldSize` (`dartflow workers --vlm-world-size`)
 * starts it with that many FSDP ranks, and stopping the role stops them all. Skips without the VLM venv.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { PROJECT_ROOT } from '../../infra/settings';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { testSettings } from '../helpers/infra';
import { waitFor } from '../helpers/wait';
import { buildTinyModel, SKIP_REASON } from '../vlm-infra/helpers';

/** The children of a process (every thread's /proc children list). */
function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
    if (text) out.push(...text.split(/\s+/).map(Number));
  }
  return out;
}
const cmdline = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};
/** Running (not gone, not a zombie waiting to be reaped). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('the trainer-vlm local role', { skip: SKIP_REASON }, () => {
  let tmp: string;
  let workers: LocalWorkers | undefined;
  const settings = testSettings();

  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-trainer-vlm-role-'));
  });
  after(async () => {
    await workers?.stop(30_000);
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('is refused without a base model, naming the flag and the variable', () => {
    assert.throws(
      () => startLocalWorkers(settings, { roles: ['trainer-vlm'], logDir: tmp, env: { DARTFLOW_VLM_BASE_MODEL: '' } }),
      /role trainer-vlm: no base model; pass --vlm-base-model DIR \(or set DARTFLOW_VLM_BASE_MODEL\)/
    );
  });

  it('refuses a world size that is not a whole number ≥ 1', () => {
    assert.throws(
      () => startLocalWorkers(settings, { roles: ['trainer-vlm'], logDir: tmp, vlmBaseModel: tmp, vlmWorldSize: 0 }),
      /role trainer-vlm: the world size must be a whole number ≥ 1, got 0/
    );
  });

  it('starts the Python trainer with 2 ranks on the trainer-vlm queue and stops it and its ranks', async () => {
    const model = path.join(tmp, 'tiny');
    await buildTinyModel(model, 0);
    workers = startLocalWorkers(settings, {
      roles: ['trainer-vlm'],
      vlmBaseModel: model,
      vlmWorldSize: 2,
      vlmTrainerArgs: ['--work-dir', path.join(tmp, 'work')],
      logDir: tmp,
      env: { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
    });
    assert.deepEqual(
      workers.children.map((c) => c.name),
      ['trainer-vlm']
    );
    const child = workers.children[0]!;
    const log = () => (fs.existsSync(child.logFile) ? fs.readFileSync(child.logFile, 'utf8') : '');
    await waitFor(
      'the trainer-vlm role to poll',
      () => Promise.resolve(log().includes('"ready": true') || child.process.exitCode !== null),
      180_000
    );
    assert.ok(log().includes(`"taskQueue": "${TASK_QUEUES.trainerVlm}"`), log().slice(-2000));
    assert.ok(log().includes('"worldSize": 2'), `started with --world-size 2:\n${log().slice(-2000)}`);
    const ranks = childPids(child.process.pid!).filter((pid) => cmdline(pid).includes('multiprocessing.spawn'));
    assert.equal(ranks.length, 1, 'rank 0 spawned rank 1');
    await workers.stop(60_000);
    assert.equal(child.process.exitCode, 0, `the Python worker exited cleanly:\n${log().slice(-2000)}`);
    await waitFor('rank 1 to exit', () => Promise.resolve(ranks.every((pid) => !alive(pid))), 30_000);
    workers = undefined;
  });

  for (const { how, exit, code: expected } of [
    // Like `kill <bench pid>`: bench/run.ts's SIGTERM handler ends with process.exit.
    { how: 'exits without stopping it (a SIGTERM handler)', exit: 'process.exit(143)', code: 143 },
    // kill -9: no exit hook could run. In both cases the worker's PR_SET_PDEATHSIG (armed through
    // DARTFLOW_PARENT_PID) signals it.
    { how: 'is killed with kill -9', exit: "process.kill(process.pid, 'SIGKILL')", code: null },
  ])
    it(`gets SIGTERM and exits when the process that started it ${how}`, async () => {
      // The Node roles see their IPC channel close; the Python trainer has none, and kept polling Temporal
      // after its parent was gone.
      const model = path.join(tmp, 'tiny');
      if (!fs.existsSync(path.join(model, 'config.json'))) await buildTinyModel(model, 0);
      const tag = expected === null ? 'killed' : 'exited'; // a log, work dir and script of its own per case
      const script = path.join(tmp, `parent-${tag}.ts`);
      fs.writeFileSync(
        script,
        `import fs from 'node:fs';
import { startLocalWorkers } from ${JSON.stringify(path.join(PROJECT_ROOT, 'cli', 'local-workers'))};
import { testSettings } from ${JSON.stringify(path.join(PROJECT_ROOT, 'test', 'helpers', 'infra'))};
const workers = startLocalWorkers(testSettings(), {
  roles: ['trainer-vlm'],
  vlmBaseModel: ${JSON.stringify(model)},
  vlmTrainerArgs: ['--work-dir', ${JSON.stringify(path.join(tmp, `work-${tag}`))}],
  logDir: ${JSON.stringify(path.join(tmp, `logs-${tag}`))},
  env: { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
});
const child = workers.children[0]!;
console.log('trainer pid ' + child.process.pid);
const timer = setInterval(() => {
  const log = fs.existsSync(child.logFile) ? fs.readFileSync(child.logFile, 'utf8') : '';
  if (log.includes('"ready": true')) { clearInterval(timer); ${exit}; }
}, 250);
`
      );
      const parent = spawn(process.execPath, ['--import', 'tsx', script], {
        cwd: PROJECT_ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      parent.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((resolve) => parent.once('exit', (c) => resolve(c)));
      const pid = Number(/trainer pid (\d+)/.exec(out)?.[1]);
      assert.equal(code, expected, `the parent ran until the trainer was ready, then ended:\n${out}`);
      assert.ok(pid > 0, out);
      try {
        await waitFor('the orphaned Python trainer to exit', () => Promise.resolve(!alive(pid)), 60_000);
      } finally {
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
    });
});
