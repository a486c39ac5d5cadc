/**
 * The workers a one-machine run (`npm start`, the quickstart bench) starts beside its campaign, read from
 * the campaign config's `env` and `policy` sections — so `env.workers`, `env.slotsPerWorker`,
 * `env.kind`, `env.remoteEndpoint`, `env.simulatedProfile`, `env.simulatedTimeScale`, `policy.servers`,
 * `policy.maxBatch`, `policy.maxWaitMs` do what docs/configuration.md says there (the network of `policy.width`
 * and the architecture options reaches the policy servers in each checkpoint). Workers started on their own
 * (`dartflow workers`, other machines) take their own flags. Pure: no processes, no I/O.
 */
import { ConfigError } from '../config/load';
import { envPoolConfigFromEnv } from '../envs/pool-factory';
import type { CampaignConfig } from '../schemas/config';
import type { LocalWorkersOptions } from './local-workers';

export function localWorkersForConfig(config: CampaignConfig): LocalWorkersOptions {
  if (config.policy.kind === 'vlm')
    throw new ConfigError(
      'policy.kind: "vlm" needs vLLM policy roles and the Python trainer, which this one-machine runner does not start; run the workers with `npx dartflow workers` and vLLM roles (docs/vlm.md), or use policy.kind: embedded'
    );
  const { env, policy } = config;
  return {
    envWorkers: env.workers,
    envSlots: env.slotsPerWorker,
    envKind: env.kind,
    ...(env.kind === 'simulated'
      ? { simulatedProfile: env.simulatedProfile, simulatedTimeScale: env.simulatedTimeScale }
      : {}),
    policyServers: policy.servers,
    env: {
      // Read by the policy servers only (workers/policy-server.ts); the other roles ignore them.
      DARTFLOW_POLICY_MAX_BATCH: String(policy.maxBatch),
      DARTFLOW_POLICY_MAX_WAIT_MS: String(policy.maxWaitMs),
      // Always '': a DARTFLOW_POLICY_SPEC_FILE left in the shell would pin these servers to its network; unpinned,
      // they serve the network each checkpoint names, whatever policy.width or architecture option the campaign sets.
      DARTFLOW_POLICY_SPEC_FILE: '',
      // The config validates that a remote campaign names its env server.
      ...(env.kind === 'remote' && env.remoteEndpoint ? { DARTFLOW_ENV_URL: env.remoteEndpoint } : {}),
    },
  };
}

/**
 * Checks, before any worker starts, that the env workers these options start can build their envs from the
 * environment they will get (env.kind osworld needs DARTFLOW_OSWORLD_*, remote a URL): one clear error naming
 * the field and the variable, instead of env workers that exit in their log files while the campaign waits.
 */
export function checkEnvWorkerSettings(opts: LocalWorkersOptions, processEnv: NodeJS.ProcessEnv): void {
  const kind = opts.envKind ?? 'browser';
  try {
    envPoolConfigFromEnv({
      ...processEnv,
      ...opts.env,
      DARTFLOW_ENV_KIND: kind,
      DARTFLOW_ENV_SLOTS: String(opts.envSlots ?? 4),
      ...(opts.simulatedProfile ? { DARTFLOW_ENV_PROFILE: opts.simulatedProfile } : {}),
    });
  } catch (err) {
    throw new ConfigError(`env.kind: "${kind}": ${err instanceof Error ? err.message : String(err)}`);
  }
}
