/**
 * The metrics pieces that need no cluster: the exposition format of the registry, where each process's
 * endpoint goes (ports per role, 0 = off, npm test), the vLLM queue reader, and — with a real worker
 * process — that a chosen port already in use stops the worker with an error naming the variable.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { PROJECT_ROOT } from '../../infra/settings';
import { metricsEndpointConfig } from '../../metrics/config';
import { sumOfSamples } from '../../metrics/policy';
import { MetricsRegistry } from '../../metrics/registry';
import { startMetricsServer } from '../../metrics/server';
import { parseExposition, total } from './exposition';

test('the registry writes counters, negative gauges, scrape-time gauges and cumulative histograms', () => {
  const r = new MetricsRegistry({ role: 'trainer' });
  const c = r.counter('dartflow_things_total', 'Things', ['outcome']);
  c.inc({ outcome: 'success' });
  c.inc({ outcome: 'success' }, 2);
  c.inc({ outcome: 'a "quoted"\nvalue\\' });
  const g = r.gauge('dartflow_loss', 'Loss', ['campaign']);
  g.set({ campaign: 'c1' }, -0.25); // the Temporal meter refuses this; a PPO loss is often negative
  r.gauge('dartflow_depth', 'Depth').collect(() => [{ labels: {}, value: 7 }]);
  const h = r.histogram('dartflow_latency_seconds', 'Latency', ['kind'], [0.1, 1]);
  for (const v of [0.05, 0.5, 0.5, 3]) h.observe({ kind: 'x' }, v);
  const text = r.render();
  assert.match(text, /^# HELP dartflow_things_total Things\n# TYPE dartflow_things_total counter\n/);
  assert.match(text, /^# TYPE dartflow_latency_seconds histogram$/m);
  const s = parseExposition(text);
  assert.equal(total(s, 'dartflow_things_total', { outcome: 'success' }), 3);
  assert.equal(total(s, 'dartflow_things_total', { outcome: 'a "quoted"\nvalue\\' }), 1, 'label values are escaped');
  assert.equal(total(s, 'dartflow_loss', { campaign: 'c1' }), -0.25);
  assert.equal(total(s, 'dartflow_depth'), 7);
  assert.deepEqual(
    s.filter((x) => x.name === 'dartflow_latency_seconds_bucket').map((x) => [x.labels.le, x.value]),
    [
      ['0.1', 1],
      ['1', 3],
      ['+Inf', 4],
    ]
  );
  assert.equal(total(s, 'dartflow_latency_seconds_sum'), 4.05);
  assert.equal(total(s, 'dartflow_latency_seconds_count'), 4);
  assert.ok(
    s.every((x) => x.labels.role === 'trainer'),
    'constant labels on every sample'
  );
});

test('the registry refuses what would make a bad or silently split series', () => {
  const r = new MetricsRegistry();
  const c = r.counter('dartflow_a_total', 'A', ['campaign']);
  assert.throws(() => c.inc({ campagin: 'x' } as never), /has no label "campagin"/);
  assert.throws(() => c.inc({}, -1), /can only go up/);
  assert.throws(() => r.counter('dartflow_a_total', 'again'), /registered twice/);
  assert.throws(() => r.gauge('dartflow-bad', 'x'), /invalid metric name/);
  assert.throws(() => r.histogram('dartflow_h', 'x', [], [1, 1]), /strictly increasing/);
  assert.throws(() => r.gauge('dartflow_g', 'x', ['le']), /invalid label name "le"/);
});

test('each role has its own default port; DARTFLOW_METRICS_PORT chooses one or turns it off', () => {
  const none = {};
  assert.deepEqual(metricsEndpointConfig('orchestrator', none), { host: '127.0.0.1', port: 9470, explicit: false });
  assert.equal(metricsEndpointConfig('trainer', none)?.port, 9471);
  assert.equal(metricsEndpointConfig('policy', none)?.port, 9480);
  assert.equal(metricsEndpointConfig('env', { DARTFLOW_METRICS_INSTANCE: '2' })?.port, 9502);
  assert.equal(metricsEndpointConfig('vllm-policy', { DARTFLOW_METRICS_BASE_PORT: '10000' })?.port, 10050);
  assert.deepEqual(metricsEndpointConfig('env', { DARTFLOW_METRICS_PORT: '9999', DARTFLOW_METRICS_HOST: '0.0.0.0' }), {
    host: '0.0.0.0',
    port: 9999,
    explicit: true,
  });
  assert.equal(metricsEndpointConfig('env', { DARTFLOW_METRICS_PORT: '0' }), undefined);
  assert.equal(metricsEndpointConfig('env', { DARTFLOW_TEST: '1' }), undefined, 'no default endpoint under npm test');
  assert.equal(metricsEndpointConfig('env', { DARTFLOW_TEST: '1', DARTFLOW_METRICS_PORT: '9999' })?.port, 9999);
  assert.throws(
    () => metricsEndpointConfig('env', { DARTFLOW_METRICS_PORT: 'abc' }),
    /DARTFLOW_METRICS_PORT must be an integer/
  );
  assert.throws(
    () => metricsEndpointConfig('orchestrator', { DARTFLOW_METRICS_INSTANCE: '1' }),
    /only 1 orchestrator processes get a default metrics port; set DARTFLOW_METRICS_PORT/
  );
});

test("the vLLM queue depth is the sum of vLLM's num_requests_waiting samples", () => {
  const text = [
    '# TYPE vllm:num_requests_waiting gauge',
    'vllm:num_requests_waiting{model_name="a"} 3.0',
    'vllm:num_requests_waiting{model_name="b"} 2.0',
    'vllm:num_requests_waiting_total 99',
  ].join('\n');
  assert.equal(sumOfSamples(text, 'vllm:num_requests_waiting'), 5);
  assert.equal(sumOfSamples(text, 'vllm:other'), undefined);
});

test('the endpoint answers GET /metrics with the registry and says when the Temporal runtime is gone', async () => {
  const registry = new MetricsRegistry({ role: 'env' });
  registry.gauge('dartflow_x', 'x').set({}, 1);
  const server = await startMetricsServer({
    registry,
    host: '127.0.0.1',
    port: 0,
    temporalUrl: 'http://127.0.0.1:1/metrics',
  });
  try {
    const res = await fetch(server.url);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    assert.equal(total(parseExposition(text), 'dartflow_x'), 1);
    assert.match(text, /# Temporal SDK metrics unavailable/);
    assert.equal((await fetch(server.url.replace('/metrics', '/other'))).status, 404);
  } finally {
    await server.close();
  }
});

test('a worker whose DARTFLOW_METRICS_PORT is taken stops at once with an error naming the variable', async () => {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', () => resolve()));
  const port = (holder.address() as net.AddressInfo).port;
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'workers/trainer-worker.ts')], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, DARTFLOW_METRICS_PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    assert.equal(code, 1, out);
    assert.match(
      out,
      new RegExp(
        `metrics port 127\\.0\\.0\\.1:${port} is already in use.*set DARTFLOW_METRICS_PORT to a free port, or 0`
      )
    );
    assert.doesNotMatch(out, /polling task queue/, 'it never started polling');
  } finally {
    holder.close();
  }
});
