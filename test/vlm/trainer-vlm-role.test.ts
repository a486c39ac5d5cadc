/**
 * `dartflow workers --roles trainer-vlm` (cli/local-workers.ts): the Python VLM trainer runs as a local
 * child on the `trainer-vlm` queue (TASK_QUEUES.trainerVlm), logs to its file and stops on SIGTERM; without
 * a base model the role is refused naming the flag. Skips without the VLM venv.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { testSettings } from '../helpers/infra';
import { waitFor } from '../helpers/wait';
import { buildTinyModel, SKIP_REASON } from '../vlm-infra/helpers';

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

  it('starts the Python trainer on the trainer-vlm queue and stops it with the others', async () => {
    const model = path.join(tmp, 'tiny');
    await buildTinyModel(model, 0);
    workers = startLocalWorkers(settings, {
      roles: ['trainer-vlm'],
      vlmBaseModel: model,
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
    await workers.stop(30_000);
    assert.ok(child.process.exitCode !== null || child.process.signalCode !== null, 'the Python worker exited');
    workers = undefined;
  });
});
