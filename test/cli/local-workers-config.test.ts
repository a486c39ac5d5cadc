/**
 * The workers `npm start` runs come from the campaign config's env and policy sections (pure mapping, no
 * processes): the quickstart's defaults give the one env worker × 4 browser contexts and one policy server
 * it always ran, every field set in the config reaches the worker options or the environment the role
 * reads, and a VLM campaign is refused with the way to run it. Also where each child serves its metrics.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkEnvWorkerSettings, localWorkersForConfig } from '../../cli/local-workers-config';
import { childMetricsUrl } from '../../cli/local-workers';
import { ConfigError, loadCampaignConfig, parseCampaignConfig } from '../../config/load';
import { QUICKSTART_CONFIG } from '../../scripts/lib/quickstart-campaign';

describe('localWorkersForConfig', () => {
  it('gives the quickstart 1 browser env worker of 4 slots and 1 policy server (batch 32, 2 ms)', () => {
    const opts = localWorkersForConfig(loadCampaignConfig(QUICKSTART_CONFIG));
    assert.deepEqual(opts, {
      envWorkers: 1,
      envSlots: 4,
      envKind: 'browser',
      policyServers: 1,
      env: { DARTFLOW_POLICY_MAX_BATCH: '32', DARTFLOW_POLICY_MAX_WAIT_MS: '2', DARTFLOW_POLICY_SPEC_FILE: '' },
    });
  });

  it('passes every env and policy field that is set', () => {
    const opts = localWorkersForConfig(
      loadCampaignConfig(QUICKSTART_CONFIG, [
        'env.workers=3',
        'env.slotsPerWorker=8',
        'env.kind=simulated',
        'env.simulatedProfile=osworld',
        'env.simulatedTimeScale=0.2',
        'policy.servers=2',
        'policy.maxBatch=16',
        'policy.maxWaitMs=5',
      ])
    );
    assert.deepEqual(opts, {
      envWorkers: 3,
      envSlots: 8,
      envKind: 'simulated',
      simulatedProfile: 'osworld',
      simulatedTimeScale: 0.2,
      policyServers: 2,
      env: { DARTFLOW_POLICY_MAX_BATCH: '16', DARTFLOW_POLICY_MAX_WAIT_MS: '5', DARTFLOW_POLICY_SPEC_FILE: '' },
    });
  });

  it('points remote env workers at env.remoteEndpoint (what DARTFLOW_ENV_URL is to a worker started on its own)', () => {
    const opts = localWorkersForConfig(
      parseCampaignConfig({ env: { kind: 'remote', remoteEndpoint: 'http://envs.internal:8790' } })
    );
    assert.equal(opts.envKind, 'remote');
    assert.equal(opts.env?.DARTFLOW_ENV_URL, 'http://envs.internal:8790');
  });

  it('never pins the policy servers to a network: they serve the one each checkpoint names', () => {
    for (const set of [[], ['policy.clickMaxContext=true'], ['policy.width=2']]) {
      const opts = localWorkersForConfig(loadCampaignConfig(QUICKSTART_CONFIG, set));
      // '' overrides a DARTFLOW_POLICY_SPEC_FILE left in the shell, which would pin them.
      assert.equal(opts.env?.DARTFLOW_POLICY_SPEC_FILE, '', set.join(' '));
    }
  });

  it("checks the env workers' settings before anything starts, naming the field and the missing variable", () => {
    const osworld = localWorkersForConfig(loadCampaignConfig(QUICKSTART_CONFIG, ['env.kind=osworld']));
    assert.throws(
      () => checkEnvWorkerSettings(osworld, {}),
      (e: unknown) => e instanceof ConfigError && /^env\.kind: "osworld": .*DARTFLOW_OSWORLD_/.test(e.message)
    );
    // The browser default and a remote campaign with its endpoint pass; the shell cannot turn them invalid.
    assert.doesNotThrow(() =>
      checkEnvWorkerSettings(localWorkersForConfig(loadCampaignConfig(QUICKSTART_CONFIG)), {
        DARTFLOW_ENV_KIND: 'osworld',
      })
    );
    const remote = localWorkersForConfig(
      parseCampaignConfig({ env: { kind: 'remote', remoteEndpoint: 'http://envs.internal:8790' } })
    );
    assert.doesNotThrow(() => checkEnvWorkerSettings(remote, {}));
  });

  it('refuses policy.kind vlm, naming the field and how to run such a campaign', () => {
    const config = parseCampaignConfig({
      policy: { kind: 'vlm', bcWarmStartEpisodes: 0 },
      trainer: { demoAnchorCoef: 0 },
    });
    // The embedded CNN's options are refused for it at load time.
    assert.throws(
      () =>
        parseCampaignConfig({
          policy: { kind: 'vlm', bcWarmStartEpisodes: 0, clickMaxContext: true },
          trainer: { demoAnchorCoef: 0 },
        }),
      (e: unknown) => e instanceof ConfigError && /policy\.clickMaxContext/.test(e.message)
    );
    assert.throws(
      () =>
        parseCampaignConfig({
          policy: { kind: 'vlm', bcWarmStartEpisodes: 0, clickWordQuery: true },
          trainer: { demoAnchorCoef: 0 },
        }),
      (e: unknown) =>
        e instanceof ConfigError && /policy\.clickWordQuery: got true; is an option of the embedded CNN/.test(e.message)
    );
    assert.throws(
      () => localWorkersForConfig(config),
      (e: unknown) => e instanceof ConfigError && /policy\.kind/.test(e.message) && /dartflow workers/.test(e.message)
    );
  });
});

describe('childMetricsUrl', () => {
  it('derives the URL each role serves its metrics on, as the role itself does (metrics/config.ts)', () => {
    const base = { DARTFLOW_METRICS_BASE_PORT: '9470' };
    assert.equal(
      childMetricsUrl('env', { ...base, DARTFLOW_METRICS_INSTANCE: '1' }),
      'http://127.0.0.1:9501/metrics' // base + env offset 30 + instance 1
    );
    assert.equal(childMetricsUrl('orchestrator', base), 'http://127.0.0.1:9470/metrics');
    assert.equal(childMetricsUrl('policy', { DARTFLOW_METRICS_PORT: '7000' }), 'http://127.0.0.1:7000/metrics');
    assert.equal(
      childMetricsUrl('env', { DARTFLOW_METRICS_PORT: '7001', DARTFLOW_METRICS_HOST: '0.0.0.0' }),
      'http://127.0.0.1:7001/metrics',
      'a wildcard bind is read on loopback'
    );
    assert.equal(
      childMetricsUrl('env', { DARTFLOW_METRICS_PORT: '7002', DARTFLOW_METRICS_HOST: '::' }),
      'http://[::1]:7002/metrics'
    );
    assert.equal(childMetricsUrl('env', { DARTFLOW_METRICS_PORT: '0' }), undefined, 'metrics off');
    assert.equal(
      childMetricsUrl('env', { DARTFLOW_METRICS_PORT: 'x' }),
      undefined,
      'a bad variable: the child says so'
    );
  });
});
