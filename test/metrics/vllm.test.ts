/**
 * vLLM's server-side figures on a VLM policy server's endpoint (metrics/vllm.ts): an HTTP server answers
 * /metrics with an exposition written by prometheus_client with vLLM 0.32's metric names, labels and types
 * for two engines (fixtures/vllm-metrics.txt, written by fixtures/vllm-metrics.gen.py in the project's
 * venv), and the policy server's registry re-exports them under dartflow_vllm_* with its server_id,
 * summed over engines, through the real /metrics endpoint of metrics/server.ts.
 *
 * The fixture is checked against itself here too (the test's own exposition parser): each mirrored
 * number must equal the sum of vLLM's samples over the engines, so a change in the fixture cannot make
 * the test pass vacuously.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { MetricsRegistry } from '../../metrics/registry';
import { startMetricsServer } from '../../metrics/server';
import { mirrorSamples, parseExpositionText, VLLM_MIRRORS, vllmServerMetrics } from '../../metrics/vllm';
import { declaredNames, parseExposition, total } from './exposition';

const FIXTURE = fs.readFileSync(path.join(__dirname, 'fixtures/vllm-metrics.txt'), 'utf8');

/** A stand-in for vLLM's HTTP server: /metrics with the fixture, behind an API key like `vllm serve --api-key`. */
async function fakeVllmMetrics(apiKey: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${apiKey}`) return void res.writeHead(401).end();
    if (req.url !== '/metrics') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(FIXTURE);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test("the exposition parser reads prometheus_client's output as the test's own parser does", () => {
  const mine = parseExpositionText(FIXTURE);
  const reference = parseExposition(FIXTURE);
  assert.equal(mine.length, reference.length);
  assert.deepEqual(mine, reference);
  // Escapes, a timestamp, a comment and a line that is not a sample.
  assert.deepEqual(parseExpositionText('a{x="q\\"uo\\\\te\\n"} 1.5 1700000000\n# c\ngarbage here\nb +Inf\nc NaN'), [
    { name: 'a', labels: { x: 'q"uo\\te\n' }, value: 1.5 },
    { name: 'b', labels: {}, value: Infinity },
    { name: 'c', labels: {}, value: NaN },
  ]);
});

test("a VLM policy server's endpoint re-exports vLLM's latency, queue, tokens and KV cache per server_id", async () => {
  const vllm = await fakeVllmMetrics('k3y');
  const registry = new MetricsRegistry({ role: 'vllm-policy' });
  const reader = vllmServerMetrics(registry, 'v0', vllm.url, 'k3y');
  const endpoint = await startMetricsServer({ registry, host: '127.0.0.1', port: 0, refreshers: [reader.refresh] });
  try {
    const text = await (await fetch(endpoint.url)).text();
    const got = parseExposition(text);
    const src = parseExposition(FIXTURE);
    assert.equal(total(got, 'dartflow_vllm_up', { server_id: 'v0' }), 1);
    assert.ok(
      got
        .filter((s) => s.name.startsWith('dartflow_vllm_'))
        .every((s) => s.labels.server_id === 'v0' && s.labels.role === 'vllm-policy'),
      'every mirrored sample carries the server id and the role'
    );
    assert.ok(
      got.every((s) => s.labels.engine === undefined && s.labels.model_name === undefined),
      "vLLM's engine and model labels are summed over"
    );

    // Histograms: every bucket, _sum and _count = the sum of the two engines' in vLLM's exposition.
    for (const [mine, theirs] of [
      ['dartflow_vllm_e2e_request_latency_seconds', 'vllm:e2e_request_latency_seconds'],
      ['dartflow_vllm_request_queue_seconds', 'vllm:request_queue_time_seconds'],
      ['dartflow_vllm_request_inference_seconds', 'vllm:request_inference_time_seconds'],
      ['dartflow_vllm_request_prefill_seconds', 'vllm:request_prefill_time_seconds'],
      ['dartflow_vllm_request_decode_seconds', 'vllm:request_decode_time_seconds'],
      ['dartflow_vllm_time_to_first_token_seconds', 'vllm:time_to_first_token_seconds'],
      ['dartflow_vllm_inter_token_latency_seconds', 'vllm:inter_token_latency_seconds'],
    ] as const) {
      const les = [...new Set(src.filter((s) => s.name === `${theirs}_bucket`).map((s) => s.labels.le!))];
      assert.ok(les.length > 5, `${theirs} has buckets in the fixture`);
      for (const le of les)
        assert.equal(total(got, `${mine}_bucket`, { le }), total(src, `${theirs}_bucket`, { le }), `${mine} le=${le}`);
      assert.equal(got.filter((s) => s.name === `${mine}_bucket`).length, les.length, `${mine}: one series`);
      assert.equal(total(got, `${mine}_count`), total(src, `${theirs}_count`));
      assert.ok(Math.abs(total(got, `${mine}_sum`) - total(src, `${theirs}_sum`)) < 1e-9);
    }
    // Concrete numbers of the fixture: 5 requests (0.4, 0.9, 3 s on engine 0; 1.2, 70 s on engine 1).
    assert.equal(total(got, 'dartflow_vllm_e2e_request_latency_seconds_count'), 5);
    assert.equal(total(got, 'dartflow_vllm_e2e_request_latency_seconds_bucket', { le: '1.0' }), 2);
    assert.equal(total(got, 'dartflow_vllm_e2e_request_latency_seconds_bucket', { le: '60.0' }), 4);
    assert.equal(total(got, 'dartflow_vllm_e2e_request_latency_seconds_bucket', { le: '+Inf' }), 5);
    assert.ok(Math.abs(total(got, 'dartflow_vllm_e2e_request_latency_seconds_sum') - 75.5) < 1e-9);

    assert.equal(total(got, 'dartflow_vllm_prompt_tokens_total'), 2000);
    assert.equal(total(got, 'dartflow_vllm_generation_tokens_total'), 130);
    assert.equal(total(got, 'dartflow_vllm_preemptions_total'), 1);
    assert.equal(total(got, 'dartflow_vllm_requests_finished_total', { finished_reason: 'stop' }), 4);
    assert.equal(total(got, 'dartflow_vllm_requests_finished_total', { finished_reason: 'length' }), 1);
    assert.equal(total(got, 'dartflow_vllm_requests_running'), 3);
    assert.equal(total(got, 'dartflow_vllm_requests_waiting'), 3);
    assert.equal(total(got, 'dartflow_vllm_kv_cache_usage_ratio'), 0.5, 'the fullest engine');
    assert.equal(reader.depth(), 3, 'the queue depth for dartflow_policy_queue_depth');
    assert.ok(!got.some((s) => s.name.endsWith('_created')), "prometheus_client's _created series are not copied");

    // vLLM gone: up 0, no mirrored samples (not the last values shown as current), TYPE lines stay.
    await vllm.close();
    const after = await (await fetch(endpoint.url)).text();
    const gone = parseExposition(after);
    assert.equal(total(gone, 'dartflow_vllm_up', { server_id: 'v0' }), 0);
    assert.ok(!gone.some((s) => s.name.startsWith('dartflow_vllm_') && s.name !== 'dartflow_vllm_up'));
    const declared = new Set(declaredNames(after));
    for (const m of VLLM_MIRRORS)
      assert.ok(declared.has(m.type === 'histogram' ? `${m.name}_bucket` : m.name), `${m.name} still declared`);
  } finally {
    await endpoint.close();
    await vllm.close().catch(() => undefined);
  }
});

test('a wrong API key or an older vLLM: up 0, or the V0 metric names', async () => {
  const vllm = await fakeVllmMetrics('right');
  try {
    const reader = vllmServerMetrics(new MetricsRegistry(), 'v1', vllm.url, 'wrong');
    await reader.refresh();
    assert.equal(reader.up(), false, 'a 401 from vLLM is not up');
  } finally {
    await vllm.close();
  }
  // vLLM's V0 engine: time_per_output_token_seconds and gpu_cache_usage_perc.
  const v0 = parseExpositionText(
    [
      'vllm:time_per_output_token_seconds_bucket{le="0.1",model_name="m"} 2.0',
      'vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 3.0',
      'vllm:time_per_output_token_seconds_count{model_name="m"} 3.0',
      'vllm:time_per_output_token_seconds_sum{model_name="m"} 0.5',
      'vllm:gpu_cache_usage_perc{model_name="m"} 0.75',
    ].join('\n')
  );
  const itl = VLLM_MIRRORS.find((m) => m.name === 'dartflow_vllm_inter_token_latency_seconds')!;
  assert.deepEqual(mirrorSamples(itl, v0), [
    { suffix: '_bucket', labels: { le: '0.1' }, value: 2 },
    { suffix: '_bucket', labels: { le: '+Inf' }, value: 3 },
    { suffix: '_count', labels: {}, value: 3 },
    { suffix: '_sum', labels: {}, value: 0.5 },
  ]);
  const kv = VLLM_MIRRORS.find((m) => m.name === 'dartflow_vllm_kv_cache_usage_ratio')!;
  assert.deepEqual(mirrorSamples(kv, v0), [{ suffix: '', labels: {}, value: 0.75 }]);
});
