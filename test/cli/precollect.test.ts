/**
 * `dartflow precollect` for a VLM campaign, run as a user runs it (node bin/dartflow.js) against the real
 * Temporal dev server and MinIO, in a private namespace, bucket and data dir, with the orchestrator and an
 * env worker (simulated envs) started by `dartflow workers`:
 * - `--policy uitars-oracle --policy-options <json>` pre-collects UI-TARS demonstrations into the campaign's
 *   experience pool, with the options applied as a campaign's policy.options would be (the screenshot is
 *   smart-resized to the given pixel bounds; the clicks are written in the 0–1000 convention of
 *   coordModel ui-tars), each step naming its stored prompt record (what the Python trainer re-scores);
 * - the options may come from a YAML file;
 * - a bad option is refused before anything runs, naming the field, what it got and the fix.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { registerScratchNamespace } from '../../infra/services';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { TrajectorySummarySchema } from '../../schemas/campaign';
import { StepRecordSchema, TrajectoryManifestSchema } from '../../schemas/records';
import { TASK_QUEUES } from '../../schemas/task-queues';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { loadSuite } from '../../tasks/loader';
import { PromptRecordSchema } from '../../vlm/prompt-record';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { runProcess } from '../helpers/run-process';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BIN = path.join(PROJECT_ROOT, 'bin', 'dartflow.js');
/** 4·28² … 16·28²: the 160×160 simulated screen is smart-resized to 112×112 (the default bounds give 280×280). */
const OPTIONS = { coordModel: 'ui-tars', minPixels: 3136, maxPixels: 12544, maxTokens: 48 };

let settings: InfraSettings;
let store: ObjectStore;
let cleanupBucket: (() => Promise<void>) | undefined;
let dataDir: string;
let workers: ChildProcess | undefined;
let workersOutput = '';

function cliEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TEMPORAL_NAMESPACE: settings.temporal.namespace,
    S3_BUCKET: store.bucket,
    DARTFLOW_DATA_DIR: dataDir,
  };
}

/** Runs `dartflow <args>` to its end: exit code and everything it printed. */
function dartflow(args: string[]): Promise<{ code: number | null; out: string }> {
  return runProcess(process.execPath, [BIN, ...args], { cwd: PROJECT_ROOT, env: cliEnv() }).then((r) => ({
    code: r.code,
    out: r.output,
  }));
}

/** Width and height from a `data:image/png;base64,…` URL (the PNG header's IHDR). */
function pngSize(dataUrl: string): { width: number; height: number } {
  const bytes = Buffer.from(dataUrl.slice(dataUrl.indexOf(',') + 1), 'base64');
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

before(async () => {
  const base = testSettings();
  const bucket = await freshBucket('cli-precollect');
  store = bucket.store;
  cleanupBucket = bucket.cleanup;
  settings = {
    ...(await registerScratchNamespace(base, `dartflow-test-${uniqueSuffix()}`)),
    s3: { ...base.s3, bucket: store.bucket },
  };
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-cli-precollect-'));
  workers = spawn(
    process.execPath,
    [BIN, 'workers', '--roles', 'orchestrator,env', '--env-kind', 'simulated', '--env-slots', '2'],
    { cwd: PROJECT_ROOT, env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] }
  );
  workers.stdout?.on('data', (d: Buffer) => (workersOutput += d.toString()));
  workers.stderr?.on('data', (d: Buffer) => (workersOutput += d.toString()));
  const ready = [`polling task queue "${TASK_QUEUES.orchestrator}"`, `env slots on task queue "${TASK_QUEUES.env}"`];
  const deadline = Date.now() + 240_000;
  while (!ready.every((line) => workersOutput.includes(line))) {
    if (Date.now() > deadline || workers.exitCode !== null)
      throw new Error(`the orchestrator and env roles did not start:\n${workersOutput}`);
    await sleep(250);
  }
});

after(async () => {
  if (workers && workers.exitCode === null && workers.signalCode === null) {
    const exited = new Promise((r) => workers!.once('exit', r));
    workers.kill('SIGTERM');
    await Promise.race([exited, sleep(60_000)]);
    if (workers.exitCode === null && workers.signalCode === null) workers.kill('SIGKILL');
  }
  await cleanupBucket?.();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('dartflow precollect --policy uitars-oracle --policy-options', () => {
  const tasks = loadSuite('quickstart').taskSpecs.map((t) => (t as { id: string }).id);

  async function pooledSteps(campaignId: string) {
    const entries = await store.list(keys.poolPrefix(campaignId));
    const out = [];
    for (const key of entries) {
      const entry = await store.getJson(key, TrajectorySummarySchema);
      const manifest = await store.getJson(entry.manifestKey, TrajectoryManifestSchema);
      const steps = await store.getJsonLines(manifest.stepsKey, StepRecordSchema, manifest.stepsSha256);
      out.push({ key, manifest, steps });
    }
    return out;
  }

  it('fills the pool with UI-TARS demonstrations made with the given options', async () => {
    const campaignId = `cli-pre-${uniqueSuffix()}`;
    const r = await dartflow([
      'precollect',
      campaignId,
      '--suite',
      'quickstart',
      '--k',
      '1',
      '--attempts',
      '2',
      '--policy',
      'uitars-oracle',
      '--vlm-model',
      'tiny',
      '--policy-options',
      JSON.stringify(OPTIONS),
    ]);
    assert.equal(r.code, 0, `${r.out}\n--- workers ---\n${workersOutput.slice(-3000)}`);
    for (const t of tasks) assert.match(r.out, new RegExp(`${t}: 1 successes in 1 attempts`), r.out);

    const pooled = await pooledSteps(campaignId);
    assert.equal(pooled.length, tasks.length, 'one pooled success per task');
    let clicks = 0;
    for (const { manifest, steps } of pooled) {
      assert.equal(manifest.source, 'demo', 'recorded as demonstrations');
      assert.ok(steps.length >= 1);
      for (const s of steps) {
        assert.equal(s.policyServer, 'uitars-oracle');
        assert.match(s.promptKey ?? '', /^prompts\/[0-9a-f]{64}\.json$/, 'a stored prompt record per step');
        const prompt = PromptRecordSchema.parse(JSON.parse((await store.getBytes(s.promptKey!)).toString('utf8')));
        const images = prompt.messages.flatMap((m) =>
          typeof m.content === 'string' ? [] : m.content.filter((p) => p.type === 'image_url')
        );
        assert.ok(images.length >= 1);
        for (const img of images)
          assert.deepEqual(pngSize(img.image_url.url), { width: 112, height: 112 }, 'smart-resized to maxPixels');
        const m = /start_box='\((\d+),(\d+)\)'/.exec(s.actionText);
        if (s.action?.type === 'click' && m) {
          clicks++;
          // The 0–1000 grid of coordModel ui-tars (the action's x, y are fractions of the screen), not pixels
          // of the 112×112 image (which would be x·112).
          assert.ok(Math.abs(Number(m[1]) / 1000 - s.action.x) <= 0.001, `${s.actionText} vs x=${s.action.x}`);
          assert.ok(Math.abs(Number(m[2]) / 1000 - s.action.y) <= 0.001, `${s.actionText} vs y=${s.action.y}`);
        }
      }
    }
    assert.ok(clicks >= 1, 'at least one demonstrated click');
  });

  it('reads the options from a YAML file', async () => {
    const campaignId = `cli-pre-file-${uniqueSuffix()}`;
    const file = path.join(dataDir, 'policy-options.yaml');
    fs.writeFileSync(file, 'minPixels: 3136\nmaxPixels: 3136\n');
    const r = await dartflow([
      'precollect',
      campaignId,
      '--suite',
      'quickstart',
      '--k',
      '1',
      '--attempts',
      '1',
      '--policy',
      'uitars-oracle',
      '--policy-options',
      file,
    ]);
    assert.equal(r.code, 0, r.out);
    const pooled = await pooledSteps(campaignId);
    assert.equal(pooled.length, tasks.length);
    const step = pooled[0]!.steps[0]!;
    const prompt = PromptRecordSchema.parse(JSON.parse((await store.getBytes(step.promptKey!)).toString('utf8')));
    const img = prompt.messages.flatMap((m) =>
      typeof m.content === 'string' ? [] : m.content.filter((p) => p.type === 'image_url')
    )[0]!;
    assert.deepEqual(pngSize(img.image_url.url), { width: 56, height: 56 }, '4·28² pixels');
  });

  it('refuses a bad option before anything runs, naming the field and the fix', async () => {
    const cases: Array<{ args: string[]; says: RegExp[] }> = [
      {
        args: ['--policy', 'uitars-oracle', '--policy-options', '{"maxPixels": "big"}'],
        says: [/--policy-options: maxPixels: got "big"/, /expected number/, /smart-resize upper bound/],
      },
      {
        args: ['--policy', 'uitars-oracle', '--policy-options', '{"maxToken": 64}'],
        says: [/unknown field "maxToken"/, /did you mean "maxTokens"/],
      },
      {
        args: ['--policy', 'uitars-oracle', '--policy-options', '{"minPixels": 5000, "maxPixels": 3136}'],
        says: [/minPixels: got 5000; must be ≤ maxPixels/],
      },
      {
        args: ['--policy', 'uitars-oracle', '--policy-options', '{"coordModel": "pixels"}'],
        says: [/coordModel: got "pixels"/, /ui-tars-1\.5/],
      },
      { args: ['--policy', 'uitars-oracle', '--policy-options', '{"maxTokens": 64'], says: [/not valid JSON/] },
      {
        args: ['--policy', 'oracle', '--policy-options', '{"maxTokens": 64}'],
        says: [/apply to --policy uitars or uitars-oracle, not "oracle"/],
      },
      { args: ['--policy', 'vlm'], says: [/--policy must be embedded, oracle, uitars, uitars-oracle, got "vlm"/] },
      { args: ['--pool-key', 'colour'], says: [/--pool-key must be task or instruction/, /curation\.poolKey/] },
    ];
    const campaignId = `cli-pre-bad-${uniqueSuffix()}`;
    // Independent CLI processes (each mostly tsx start-up): two at a time keep both cores busy.
    const outcomes: Array<{ code: number | null; out: string }> = [];
    for (let i = 0; i < cases.length; i += 2)
      outcomes.push(
        ...(await Promise.all(
          cases
            .slice(i, i + 2)
            .map((c) => dartflow(['precollect', campaignId, '--suite', 'quickstart', '--k', '1', ...c.args]))
        ))
      );
    cases.forEach((c, i) => {
      const r = outcomes[i]!;
      assert.equal(r.code, 1, `${c.args.join(' ')}: refused\n${r.out}`);
      for (const re of c.says) assert.match(r.out, re, c.args.join(' '));
    });
    assert.deepEqual(await store.list(`campaigns/${campaignId}/`), [], 'nothing ran');
  });
});
