/**
 * No credential in workflow history, logs or stored objects. A private MinIO (free port, temp data dir)
 * gets a random secret key that reaches the workers only through S3_SECRET_KEY_FILE; the policy token
 * comes through DARTFLOW_POLICY_TOKEN_FILE. A short real campaign runs with orchestrator, env worker
 * (Chromium), policy server and trainer as child processes; then every workflow history of the private
 * namespace (payloads decoded), every worker log and every JSON object in the bucket is scanned for both
 * secrets. The scanner is checked on planted strings first, so this test can fail.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { DartflowClient } from '../../client/dartflow-client';
import { registerScratchNamespace, startMinio, stopPid } from '../../infra/services';
import { loadInfraSettings, type InfraSettings } from '../../infra/settings';
import { ObjectStore } from '../../storage/object-store';
import { freePort, testSettings, uniqueSuffix } from '../helpers/infra';

/** Every string in `value`, with byte arrays (payload data, memo, search attributes) decoded as UTF-8. */
function strings(value: unknown, out: string[] = [], depth = 0): string[] {
  if (depth > 64 || value === null || value === undefined) return out;
  if (typeof value === 'string') out.push(value);
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('utf8'));
  else if (Array.isArray(value)) for (const v of value) strings(v, out, depth + 1);
  else if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      out.push(k);
      strings(v, out, depth + 1);
    }
  } else out.push(String(value));
  return out;
}

/** Where `secret` appears in `text`, also base64-encoded (what a JSON encoding of raw bytes would show). */
function findSecret(text: string, secret: string): boolean {
  return text.includes(secret) || text.includes(Buffer.from(secret).toString('base64'));
}

function scan(value: unknown, secrets: Record<string, string>): string[] {
  const text = strings(value).join('\n');
  return Object.entries(secrets)
    .filter(([, s]) => findSecret(text, s))
    .map(([name]) => name);
}

let tmp: string;
let settings: InfraSettings;
let minioPid: number | undefined;
let workers: LocalWorkers | undefined;
let client: DartflowClient | undefined;
const secretKey = `sk-${randomBytes(18).toString('hex')}`;
const policyToken = `pt-${randomBytes(18).toString('hex')}`;
const SECRETS = { 's3 secret key': secretKey, 'policy token': policyToken };

test('the scanner finds a planted secret in strings, bytes and base64', () => {
  assert.deepEqual(scan({ a: [`x${secretKey}y`] }, SECRETS), ['s3 secret key']);
  assert.deepEqual(scan({ data: Buffer.from(`{"t":"${policyToken}"}`) }, SECRETS), ['policy token']);
  assert.deepEqual(scan(JSON.stringify({ b: Buffer.from(secretKey).toString('base64') }), SECRETS), ['s3 secret key']);
  assert.deepEqual(scan({ clean: 'nothing here' }, SECRETS), []);
});

test('an external S3_ENDPOINT never falls back to the dev credentials', () => {
  assert.throws(
    () => loadInfraSettings({ S3_ENDPOINT: 'https://s3.example.internal:9000' }),
    /S3_ENDPOINT=.* is set but S3_ACCESS_KEY is not.*only for the local MinIO/s
  );
  const file = path.join(os.tmpdir(), `dartflow-secret-${uniqueSuffix()}`);
  fs.writeFileSync(file, `${secretKey}\n`, { mode: 0o600 });
  try {
    const s = loadInfraSettings({
      S3_ENDPOINT: 'https://s3.example.internal',
      S3_ACCESS_KEY: 'ak-test',
      S3_SECRET_KEY_FILE: file,
    });
    assert.equal(s.s3.secretKey, secretKey, 'read from the file, trimmed');
  } finally {
    fs.rmSync(file);
  }
});

before(async () => {
  const base = testSettings();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-secrets-'));
  const secretFile = path.join(tmp, 's3-secret');
  const tokenFile = path.join(tmp, 'policy-token');
  fs.writeFileSync(secretFile, secretKey, { mode: 0o600 });
  fs.writeFileSync(tokenFile, policyToken, { mode: 0o600 });
  const [port, consolePort, policyPort] = [await freePort(), await freePort(), await freePort()];
  const namespace = `dartflow-secrets-${uniqueSuffix()}`;
  const bucket = `secrets-${uniqueSuffix()}`.toLowerCase();
  const endpoint = `http://127.0.0.1:${port}`;
  const local: InfraSettings = {
    ...base,
    dataDir: tmp,
    s3: { ...base.s3, external: false, endpoint, port, consolePort, accessKey: 'secrets-test', secretKey, bucket },
  };
  minioPid = (await startMinio(local)).pid;
  settings = { ...(await registerScratchNamespace(local, namespace)), s3: { ...local.s3, external: true } };
  await ObjectStore.fromSettings(settings).ensureBucket();
  workers = startLocalWorkers(settings, {
    envWorkers: 1,
    envSlots: 2,
    policyServers: 1,
    policyBasePort: policyPort,
    logDir: path.join(tmp, 'worker-logs'),
    env: {
      TEMPORAL_NAMESPACE: namespace,
      S3_ENDPOINT: endpoint,
      S3_ACCESS_KEY: 'secrets-test',
      S3_SECRET_KEY_FILE: secretFile,
      S3_SECRET_KEY: undefined,
      S3_BUCKET: bucket,
      DARTFLOW_DATA_DIR: tmp,
      DARTFLOW_POLICY_TOKEN_FILE: tokenFile,
      DARTFLOW_POLICY_TOKEN: undefined,
      DARTFLOW_LOG_LEVEL: 'INFO',
    },
  });
  client = await DartflowClient.connect(settings);
});

after(async () => {
  await client?.close();
  await workers?.stop();
  if (minioPid) await stopPid(minioPid);
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('a real campaign leaves no credential in workflow histories, worker logs or stored objects', async (t) => {
  assert.ok(client && workers);
  const campaign = await client.startCampaign({
    campaign: { id: `secrets-${uniqueSuffix()}`, suite: 'quickstart', mode: 'sync', maxTrainSteps: 1 },
    rollout: { envConcurrency: 4, maxSteps: 3 },
    trainer: { minGroups: 1, maxGroups: 2, klBeta: 0 },
    eval: { everyVersions: 1, episodesPerTask: 2, gateEveryVersions: 0 },
  });
  const result = await campaign.result();
  assert.equal(result.trainSteps, 1);

  // histories: every workflow of the private namespace (campaign, task groups, rollouts, evaluations)
  const temporal = client.temporal;
  let histories = 0;
  let events = 0;
  for await (const wf of temporal.workflow.list()) {
    const history = await temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    histories++;
    events += history.events?.length ?? 0;
    assert.deepEqual(scan(history, SECRETS), [], `workflow ${wf.workflowId} history`);
  }
  assert.ok(histories >= 3 && events > 50, `${histories} histories, ${events} events scanned`);

  // every non-binary object (before the workers stop: policy servers unregister on shutdown): campaign config/state, manifests, ledger, registry, evals, pool
  const store = ObjectStore.fromSettings(settings);
  const objects = (await store.list('')).filter((k) => !/\.(png|safetensors|onnx)$/.test(k));
  const prefixes = [...new Set(objects.map((k) => k.split('/').slice(0, 3).join('/')))];
  assert.ok(
    objects.some((k) => k.endsWith('manifest.json')) && objects.some((k) => k.startsWith('registry/')),
    prefixes.join(', ')
  );
  for (const key of objects) {
    const text = (await store.getBytes(key)).toString('utf8');
    assert.deepEqual(scan(text, SECRETS), [], `object ${key}`);
  }
  // the workers got the secrets as file paths only: not in their command lines or environments
  for (const c of workers.children) {
    const pid = c.process.pid;
    if (!pid || c.process.exitCode !== null) continue;
    for (const f of ['cmdline', 'environ']) {
      const text: string = fs.readFileSync(`/proc/${pid}/${f}`, 'utf8').replace(/\0/g, '\n');
      assert.deepEqual(scan(text, SECRETS), [], `${c.name} /proc/${pid}/${f}`);
    }
  }

  // logs of every worker process (and of the private MinIO itself)
  await workers.stop();
  const logDirs = [path.join(tmp, 'worker-logs'), path.join(tmp, 'logs')];
  let logBytes = 0;
  for (const dir of logDirs.filter((d) => fs.existsSync(d))) {
    for (const f of fs.readdirSync(dir)) {
      const text = fs.readFileSync(path.join(dir, f), 'utf8');
      logBytes += text.length;
      assert.deepEqual(scan(text, SECRETS), [], `log ${f}`);
    }
  }
  assert.ok(logBytes > 0, 'worker logs were captured');
  t.diagnostic(
    `scanned ${histories} workflow histories (${events} events), ${objects.length} objects, ${logBytes} bytes of logs`
  );
});
