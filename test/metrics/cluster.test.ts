/**
 * The metrics endpoints of real worker processes: every role as its own process (cli/local-workers.ts,
 * simulated envs so it is quick) in a private namespace and bucket, each with DARTFLOW_METRICS_PORT on a
 * free port. After a small real campaign, each endpoint is scraped over HTTP and its numbers are checked
 * against what the campaign recorded in MinIO and returned: episodes by outcome against the trajectory
 * manifests, train steps and loss against the ledger, served version and lag against the result, held-out
 * success against the final evaluation; and each serves the Temporal SDK's own metrics next to dartflow's.
 * The trainer and orchestrator also write TensorBoard scalars (DARTFLOW_TENSORBOARD_DIR), checked against
 * the same ledger and evaluation. Then the Grafana dashboard is checked to query only metric names these
 * endpoints export (and the vLLM figures a VLM policy server mirrors, metrics/vllm.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { readLedger, readManifests, startBenchCluster, type BenchCluster } from '../../bench/lib/bench-cluster';
import { isSuccess } from '../../algorithms/success';
import type { Role } from '../../cli/local-workers';
import { PROJECT_ROOT } from '../../infra/settings';
import { readEventFile } from '../../lib/tensorboard';
import { MetricsRegistry } from '../../metrics/registry';
import { vllmServerMetrics } from '../../metrics/vllm';
import { freePort, uniqueSuffix } from '../helpers/infra';
import { waitFor } from '../helpers/wait';
import { declaredNames, has, parseExposition, scrape, scrapeText, total, type Sample } from './exposition';

const NAMES = ['orchestrator', 'trainer', 'env-0', 'policy-p0'] as const;
type Name = (typeof NAMES)[number];
const ports = {} as Record<Name, number>;
const url = (name: Name) => `http://127.0.0.1:${ports[name]}/metrics`;
let cluster: BenchCluster;
/** What each endpoint answered after the campaign (the dashboard test reads it too). */
const scraped = {} as Record<Name, Sample[]>;
const scrapedText = {} as Record<Name, string>;
/** DARTFLOW_TENSORBOARD_DIR of the worker processes (they inherit this process's environment). */
const tensorboardDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-metrics-tb-'));

before(async () => {
  process.env.DARTFLOW_TENSORBOARD_DIR = tensorboardDir;
  for (const n of NAMES) ports[n] = await freePort();
  cluster = await startBenchCluster('metrics', {
    envWorkers: 1,
    envSlots: 2,
    envKind: 'simulated',
    simulatedProfile: 'fast',
    simulatedBernoulliReward: 0.5,
    policyServers: 1,
    policyBasePort: await freePort(),
    metricsPort: ({ name }: { role: Role; name: string }) => ports[name as Name],
  });
});

after(async () => {
  await cluster?.close();
  delete process.env.DARTFLOW_TENSORBOARD_DIR;
  fs.rmSync(tensorboardDir, { recursive: true, force: true });
});

/** The scalar events of one run directory (every tfevents file in it, CRCs checked), in file order. */
function tensorboardRun(campaignId: string, run: 'train' | 'eval') {
  const dir = path.join(tensorboardDir, campaignId, run);
  return fs
    .readdirSync(dir)
    .filter((f) => f.includes('tfevents'))
    .sort()
    .flatMap((f) => readEventFile(path.join(dir, f)))
    .filter((e) => Object.keys(e.scalars).length > 0);
}

test('each worker process serves Temporal SDK and dartflow metrics that match the campaign it ran', async () => {
  // Every endpoint answers once its process is up (Temporal's metrics appear with the first worker).
  for (const n of NAMES) await waitFor(`the ${n} metrics endpoint`, () => scrape(url(n)).catch(() => undefined));

  const campaignId = `metrics-${uniqueSuffix()}`;
  const campaign = await cluster.client.startCampaign({
    campaign: { id: campaignId, suite: 'quickstart', maxTrainSteps: 2 },
    rollout: { envConcurrency: 4, maxSteps: 3 },
    trainer: { minGroups: 1, maxGroups: 2 },
    eval: { everyVersions: 2, episodesPerTask: 2, gateEveryVersions: 0 },
    env: { kind: 'simulated' },
  });
  const result = await campaign.result();
  for (const n of NAMES) {
    scrapedText[n] = await scrapeText(url(n));
    scraped[n] = parseExposition(scrapedText[n]);
  }
  const { orchestrator, trainer, policy, env } = {
    orchestrator: scraped.orchestrator,
    trainer: scraped.trainer,
    policy: scraped['policy-p0'],
    env: scraped['env-0'],
  };

  // env worker: one count per episode it ran = one manifest per trajectory in this private bucket
  // (rollouts and evaluations; fast simulated envs never crash, so there are no retried attempts).
  const manifests = [
    ...(await readManifests(cluster.store, campaignId)),
    ...(await readManifests(cluster.store, `${campaignId}.eval`)),
  ];
  assert.ok(manifests.length > 0);
  assert.equal(total(env, 'dartflow_episodes_total'), manifests.length, 'episodes counted = episodes run');
  assert.equal(
    total(env, 'dartflow_episodes_total', { outcome: 'success' }),
    manifests.filter((m) => m.status === 'ok' && isSuccess(m.reward)).length,
    'successes counted = successful manifests'
  );
  assert.equal(total(env, 'dartflow_episodes_total', { outcome: 'error' }), 0);
  assert.equal(total(env, 'dartflow_env_slots_total'), 2);
  const fraction = total(env, 'dartflow_env_busy_fraction');
  assert.ok(fraction >= 0 && fraction <= 1, `busy fraction ${fraction}`);
  assert.ok(total(env, 'dartflow_env_busy_seconds_total') > 0, 'slots were busy for a while');
  const steps = manifests.reduce((a, m) => a + m.numSteps, 0);
  assert.equal(total(env, 'dartflow_policy_act_seconds_count'), steps, 'one act() latency per step');
  assert.ok(total(env, 'temporal_activity_execution_latency_count', { task_queue: 'env' }) > 0, 'Temporal SDK metric');
  assert.ok(
    env.every((s) => s.labels.role === 'env'),
    'every sample says which role it came from'
  );

  // policy server: serves the last trained version, which is the newest checkpoint (lag 0)
  assert.equal(
    total(policy, 'dartflow_policy_served_version', { server_id: 'p0', campaign: campaignId }),
    result.policyVersion
  );
  assert.equal(
    total(policy, 'dartflow_policy_latest_version', { server_id: 'p0', campaign: campaignId }),
    result.policyVersion
  );
  assert.equal(total(policy, 'dartflow_policy_version_lag', { server_id: 'p0', campaign: campaignId }), 0);
  assert.ok(has(policy, 'dartflow_policy_queue_depth'));
  const requests = total(policy, 'dartflow_policy_request_seconds_count', { server_id: 'p0', code: '200' });
  assert.ok(requests > 0 && requests <= steps, `act requests answered: ${requests} (steps ${steps})`);
  assert.ok(total(policy, 'dartflow_policy_batch_size_sum') >= requests, 'every request was in a batch');
  assert.ok(total(policy, 'temporal_activity_execution_latency_count', { activity_type: 'reloadPolicy' }) > 0);

  // trainer: one count per train step, gauges = the last ledger entry's metrics
  const ledger = await readLedger(cluster.store, campaignId);
  assert.equal(total(trainer, 'dartflow_train_steps_total', { kind: 'rl', campaign: campaignId }), result.trainSteps);
  assert.equal(ledger.length, result.trainSteps);
  const last = ledger[ledger.length - 1]!;
  assert.equal(total(trainer, 'dartflow_train_version', { campaign: campaignId }), last.toVersion);
  for (const [metric, key] of [
    ['dartflow_train_loss', 'loss'],
    ['dartflow_train_kl', 'kl'],
    ['dartflow_train_entropy', 'entropyMean'],
    ['dartflow_train_clip_fraction', 'clipFraction'],
  ] as const) {
    assert.ok(last.metrics[key] !== undefined, `the ledger records ${key}`);
    assert.ok(
      Math.abs(total(trainer, metric, { campaign: campaignId }) - last.metrics[key]!) < 1e-9,
      `${metric} = ledger ${key}`
    );
  }
  assert.ok(total(trainer, 'temporal_activity_execution_latency_count', { activity_type: 'trainStep' }) >= 1);

  // TensorBoard: one event per train step at the version it produced, values = the ledger's (as float32)
  const trainEvents = tensorboardRun(campaignId, 'train');
  assert.deepEqual(
    trainEvents.map((e) => e.step),
    ledger.map((l) => l.toVersion),
    'one train event per ledger entry, at its version'
  );
  ledger.forEach((entry, i) => {
    const s = trainEvents[i]!.scalars;
    for (const [tag, key] of [
      ['train/loss', 'loss'],
      ['train/kl', 'kl'],
      ['train/entropy', 'entropyMean'],
      ['train/clip_fraction', 'clipFraction'],
      ['tis/weight_mean', 'isWeightMean'],
      ['tis/weight_min', 'isWeightMin'],
    ] as const)
      assert.equal(s[tag], Math.fround(entry.metrics[key]!), `step ${entry.trainStep} ${tag} = ledger ${key}`);
    const rewards = entry.consumed.map((c) => c.reward);
    assert.equal(
      s['train/batch_success'],
      Math.fround(rewards.filter((r) => isSuccess(r)).length / rewards.length),
      "batch success = the consumed trajectories' successes"
    );
  });

  // orchestrator: held-out success of the final evaluation; workflow metrics of the SDK
  assert.ok(result.finalEval, 'the campaign ended with an evaluation');
  assert.equal(
    total(orchestrator, 'dartflow_eval_success_ratio', { campaign: campaignId }),
    result.finalEval.successRate
  );
  assert.equal(total(orchestrator, 'dartflow_eval_version', { campaign: campaignId }), result.finalEval.version);
  const evalEvents = tensorboardRun(campaignId, 'eval');
  const lastEval = evalEvents.at(-1);
  assert.equal(lastEval?.step, result.finalEval.version, 'the last eval event is the final evaluation');
  assert.equal(lastEval.scalars['eval/success'], Math.fround(result.finalEval.successRate));
  assert.ok(total(orchestrator, 'temporal_workflow_completed_total') > 0, 'child workflows completed');
  assert.ok(has(orchestrator, 'temporal_sticky_cache_size'));
});

/** Metric names a PromQL expression refers to (dartflow_* and temporal_*; label names never match these prefixes). */
function metricNamesIn(expr: string): string[] {
  return [...expr.matchAll(/\b(?:dartflow|temporal)_[a-zA-Z0-9_]+\b/g)].map((m) => m[0]);
}

test('the Grafana dashboard queries only metric names the endpoints export, through the ${DS_PROMETHEUS} input', () => {
  assert.ok(scraped.orchestrator, 'needs the scrapes of the campaign test');
  const dashboard = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'infra/grafana/dartflow.json'), 'utf8')) as {
    __inputs: Array<{ name: string; type: string; pluginId: string }>;
    panels: Array<{
      id: number;
      title: string;
      type: string;
      datasource?: { uid?: string };
      targets?: Array<{ expr: string; datasource?: { uid?: string } }>;
    }>;
    templating: { list: Array<{ name: string; query?: unknown; datasource?: { uid?: string } }> };
  };
  assert.deepEqual(
    dashboard.__inputs.map((i) => [i.name, i.type, i.pluginId]),
    [['DS_PROMETHEUS', 'datasource', 'prometheus']]
  );
  // Exported = declared by a `# TYPE` line: a counter of failures is exported before its first failure.
  const exported = new Set(Object.values(scrapedText).flatMap(declaredNames));
  for (const samples of Object.values(scraped))
    for (const s of samples) assert.ok(exported.has(s.name), `${s.name} has a TYPE line`);
  // A VLM policy server (not in this cluster: no vLLM here) exports vLLM's figures: the families it
  // registers (metrics/vllm.ts, tested against a vLLM exposition in vllm.test.ts) count as exported.
  const vllmRegistry = new MetricsRegistry({ role: 'vllm-policy' });
  vllmServerMetrics(vllmRegistry, 'v0', 'http://127.0.0.1:1');
  for (const n of declaredNames(vllmRegistry.render())) exported.add(n);
  const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
  for (const v of dashboard.templating.list)
    if (typeof v.query === 'string') exprs.push({ panel: `$${v.name}`, expr: v.query });
  assert.ok(exprs.length >= 20, `${exprs.length} queries`);
  const referenced = new Set<string>();
  for (const { panel, expr } of exprs) {
    const names = metricNamesIn(expr);
    assert.ok(names.length > 0 || panel.startsWith('$'), `panel "${panel}" queries a metric: ${expr}`);
    for (const n of names) {
      referenced.add(n);
      assert.ok(exported.has(n), `panel "${panel}" queries ${n}, which no endpoint exported`);
    }
  }
  // The panels cover every metric the issue asks for, and the key Temporal SDK ones.
  for (const n of [
    'dartflow_episodes_total',
    'dartflow_env_busy_seconds_total',
    'dartflow_policy_act_seconds_bucket',
    'dartflow_policy_request_seconds_bucket',
    'dartflow_policy_queue_depth',
    'dartflow_train_loss',
    'dartflow_train_kl',
    'dartflow_train_entropy',
    'dartflow_train_clip_fraction',
    'dartflow_policy_version_lag',
    'dartflow_vllm_e2e_request_latency_seconds_bucket',
    'dartflow_vllm_request_queue_seconds_bucket',
    'dartflow_eval_success_ratio',
    'temporal_activity_execution_latency_bucket',
    'temporal_activity_schedule_to_start_latency_bucket',
    'temporal_sticky_cache_size',
  ])
    assert.ok(referenced.has(n), `the dashboard shows ${n}`);
  const ids = dashboard.panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const p of dashboard.panels.filter((x) => x.type !== 'row'))
    assert.equal(p.datasource?.uid, '${DS_PROMETHEUS}', `panel "${p.title}" uses the imported data source`);
});
