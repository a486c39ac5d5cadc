/**
 * The env-held reading of the benchmarks: Σ of the env workers' busy slot-seconds over their real /metrics
 * endpoints, and no figure at all (not a partial sum) when one worker cannot be read or is not the bench's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENV_BUSY_SECONDS, envBusySeconds } from '../../bench/lib/env-held';
import { MetricsRegistry } from '../../metrics/registry';
import { startMetricsServer, type MetricsServer } from '../../metrics/server';

async function envWorkerEndpoint(busySeconds: number): Promise<MetricsServer> {
  const registry = new MetricsRegistry({ role: 'env' });
  registry.counter(ENV_BUSY_SECONDS, 'Slot-seconds spent busy').inc({}, busySeconds);
  // Another metric with the same prefix must not count.
  registry.gauge('dartflow_env_busy_seconds_total_other', 'not this one').set({}, 1_000);
  // What the worker's Temporal SDK metrics carry: the namespace it polls.
  registry.gauge('temporal_worker_task_slots_used', 'slots', ['namespace']).set({ namespace: 'bench-ns' }, 3);
  return startMetricsServer({ registry, host: '127.0.0.1', port: 0 });
}

test('envBusySeconds sums the env workers and gives up when one is unreachable or serves another namespace', async () => {
  const a = await envWorkerEndpoint(120.5);
  const b = await envWorkerEndpoint(30);
  try {
    assert.equal(await envBusySeconds([a.url, b.url]), 150.5);
    assert.equal(await envBusySeconds([a.url, b.url], 'bench-ns'), 150.5);
    assert.equal(await envBusySeconds([a.url, b.url], 'someone-elses-ns'), undefined);
    assert.equal(await envBusySeconds([a.url, 'http://127.0.0.1:1/metrics']), undefined);
    assert.equal(await envBusySeconds([]), undefined);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
