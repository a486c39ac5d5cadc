/**
 * vLLM start-up failures are reported with the log file's name and tail, and leave no process behind:
 * a server that does not become healthy in time, one that exits (a bad argument), and a missing folder.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startVllmServer } from '../../infra/vllm';
import { buildTinyModel, SKIP_REASON } from './helpers';

/** PIDs of live processes whose command line mentions `needle` (here: a unique temp folder). */
function processesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z') continue;
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(needle)) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

describe('vLLM start-up failures', { skip: SKIP_REASON }, () => {
  let tmp: string;
  let model: string;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-vllm-fail-'));
    model = path.join(tmp, 'model');
    await buildTinyModel(model, 0);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a server that is not healthy in time is stopped, and the error names its log', async () => {
    await assert.rejects(
      startVllmServer({ modelDir: model, servedModelName: 'slow', dataDir: tmp, startupTimeoutMs: 3000 }),
      (err: Error) => {
        assert.match(err.message, /did not become healthy within 3s/);
        assert.match(err.message, new RegExp(`Log: ${tmp}/logs/vllm-slow-\\d+\\.log`));
        return true;
      }
    );
    assert.deepEqual(processesMentioning(model), []);
  });

  it('a server that exits during start-up is reported at once, with its log', async () => {
    const started = Date.now();
    await assert.rejects(
      startVllmServer({ modelDir: model, servedModelName: 'badarg', dataDir: tmp, extraArgs: ['--no-such-flag'] }),
      (err: Error) => {
        assert.match(err.message, /exited during start-up/);
        assert.match(err.message, /Log: .*vllm-badarg-\d+\.log/);
        return true;
      }
    );
    assert.ok(Date.now() - started < 120_000, 'not after the 300 s start-up timeout');
    assert.deepEqual(processesMentioning(model), []);
  });

  it('a folder without config.json is refused before anything starts', async () => {
    const missing = path.join(tmp, 'no-such-model');
    await assert.rejects(
      startVllmServer({ modelDir: missing, servedModelName: 'missing', dataDir: tmp }),
      /No model folder at .*no-such-model \(no config.json\)/
    );
    const logs = fs.existsSync(path.join(tmp, 'logs')) ? fs.readdirSync(path.join(tmp, 'logs')) : [];
    assert.deepEqual(
      logs.filter((f) => f.startsWith('vllm-missing-')),
      []
    );
  });
});
