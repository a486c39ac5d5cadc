/**
 * Test helpers for the Python VLM trainer worker (python/dartflow_vlm/worker.py): start it on a queue,
 * call its activities through a real Temporal workflow (as the campaign's proxies do), and compare two
 * model folders' weights with transformers.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { bundleWorkflowCode, type Worker } from '@temporalio/worker';
import type { TrainStepResult } from '../../activities/trainer/types';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { connectClient } from '../../infra/temporal-connection';
import { uniqueSuffix } from '../helpers/infra';
import { createTestWorker, testTaskQueue } from '../helpers/temporal';
import { waitFor } from '../helpers/wait';
import { PYTHON, runPython } from '../vlm-infra/helpers';

export interface PythonTrainer {
  queue: string;
  /** Everything the worker printed so far (stdout and stderr). */
  log(): string;
  stop(): Promise<void>;
}

/** Starts `python -m dartflow_vlm.worker` on `queue` and waits for its `{"ready": true}` line. */
export async function startPythonTrainer(o: {
  baseModel: string;
  workDir: string;
  bucket: string;
  queue: string;
  extraArgs?: string[];
  /** More environment (e.g. TEMPORAL_NAMESPACE of a scratch namespace). */
  env?: NodeJS.ProcessEnv;
}): Promise<PythonTrainer> {
  assert.ok(PYTHON, 'the VLM venv is not installed (bash infra/install-vlm.sh)');
  let out = '';
  const child: ChildProcess = spawn(
    PYTHON,
    [
      '-m',
      'dartflow_vlm.worker',
      '--base-model',
      o.baseModel,
      '--task-queue',
      o.queue,
      '--work-dir',
      o.workDir,
      ...(o.extraArgs ?? []),
    ],
    {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...o.env, S3_BUCKET: o.bucket, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
    }
  );
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  try {
    await waitFor(
      'the Python trainer worker to be ready',
      () => Promise.resolve(out.includes('"ready": true') || child.exitCode !== null),
      180_000
    );
    assert.ok(out.includes('"ready": true'), `the Python worker did not start:\n${out.slice(-3000)}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return { queue: o.queue, log: () => out, stop };
}

/**
 * The only workflow these tests need: call an activity by name on a given queue with a retry policy, as
 * the campaign's proxies do. Written at run time (a workflow file must be bundled on its own) under the
 * data dir, inside the project, so the bundler resolves @temporalio/workflow from the project's node_modules.
 */
export interface ActivityCaller {
  /** Runs activity `name` on `queue` through a workflow; rejects with the WorkflowFailedError. */
  call(queue: string, name: string, input: unknown): Promise<TrainStepResult>;
  close(): Promise<void>;
}

/** A workflow worker on a private queue running `callActivity`, and a client to start it. */
export async function startActivityCaller(settings: InfraSettings): Promise<ActivityCaller> {
  const workflowQueue = testTaskQueue('vlm-call-wf');
  // A file inside the checkout, so the bundler resolves @temporalio/workflow whatever the data dir is.
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, 'fixtures', 'call-activity-workflow.ts'),
  });
  const worker: Worker = await createTestWorker(settings, { taskQueue: workflowQueue, workflowBundle });
  const running = worker.run();
  const client: Client = await connectClient(settings);
  return {
    async call(queue, name, input) {
      return (await client.workflow.execute('callActivity', {
        taskQueue: workflowQueue,
        workflowId: `vlm-call-${uniqueSuffix()}`,
        args: [queue, name, input],
      })) as TrainStepResult;
    },
    async close() {
      worker.shutdown();
      await running.catch(() => undefined);
      await client.connection.close();
    },
  };
}

/** How many of a model folder's tensors differ from another's (transformers loads both). */
export async function changedTensors(dirA: string, dirB: string): Promise<{ tensors: number; changed: number }> {
  const out = await runPython([
    '-c',
    [
      'import json, sys, torch',
      'from transformers import Qwen2VLForConditionalGeneration as M',
      'a = M.from_pretrained(sys.argv[1]).state_dict()',
      'b = M.from_pretrained(sys.argv[2]).state_dict()',
      'print(json.dumps({"tensors": len(a), "changed": sum(not torch.equal(a[k], b[k]) for k in a)}))',
    ].join('\n'),
    dirA,
    dirB,
  ]);
  return JSON.parse(out.trim().split('\n').pop()!) as { tensors: number; changed: number };
}
