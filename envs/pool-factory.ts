/**
 * Builds the env pool an env worker serves from a small config (kind + slots), so the worker,
 * env-server and benchmarks share one way of saying "4 browser slots" or "200 simulated envs".
 */
import { z } from 'zod';
import { loadInfraSettings } from '../infra/settings';
import { BrowserEnvPool } from './browser/pool';
import { OsworldEnvOptionsSchema, osworldOptionsFromEnv } from './osworld/config';
import { OsworldEnvPool } from './osworld/pool';
import { RemoteEnvPool } from './remote/client';
import { SimulatedEnvPool, SIM_PROFILES } from './simulated';
import type { EnvPool } from './types';

const prob = z.number().min(0).max(1);

export const EnvPoolConfigSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('browser'),
    slots: z.number().int().min(1).max(64).default(4),
    chromiumPath: z.string().optional(),
  }),
  z.object({
    kind: z.literal('simulated'),
    slots: z.number().int().min(1).max(10_000).default(64),
    profile: z.enum(Object.keys(SIM_PROFILES) as [string, ...string[]]).default('fast'),
    seed: z.number().int().default(1),
    /** Multiplies every latency of the profile (CampaignConfig env.simulatedTimeScale). */
    timeScale: z.number().positive().max(1000).default(1),
    /** Success probability of the `bernoulli` reward model (throughput benchmarks); absent = the `path` model. */
    bernoulliReward: prob.optional(),
  }),
  z.object({
    kind: z.literal('remote'),
    slots: z.number().int().min(1).max(1000).default(4),
    url: z.url(),
    token: z.string().min(1).optional(),
  }),
  // OSWorld VMs leased from a GUI-Docker-Env cluster (docs/osworld.md).
  OsworldEnvOptionsSchema.extend({
    kind: z.literal('osworld'),
    slots: z.number().int().min(1).max(1000).default(4),
  }),
]);
export type EnvPoolConfig = z.input<typeof EnvPoolConfigSchema>;

export function createEnvPool(config: EnvPoolConfig): EnvPool {
  const c = EnvPoolConfigSchema.parse(config);
  switch (c.kind) {
    case 'browser': {
      const chromiumPath = c.chromiumPath ?? loadInfraSettings().chromiumPath;
      return new BrowserEnvPool({ slots: c.slots, ...(chromiumPath ? { executablePath: chromiumPath } : {}) });
    }
    case 'simulated': {
      const profile = SIM_PROFILES[c.profile];
      if (!profile) throw new Error(`unknown simulated profile ${c.profile}`);
      return new SimulatedEnvPool({
        slots: c.slots,
        profile,
        seed: c.seed,
        timeScale: c.timeScale,
        ...(c.bernoulliReward !== undefined ? { rewardModel: { kind: 'bernoulli', p: c.bernoulliReward } } : {}),
      });
    }
    case 'remote':
      return new RemoteEnvPool({ slots: c.slots, baseUrl: c.url, ...(c.token ? { token: c.token } : {}) });
    case 'osworld':
      return new OsworldEnvPool(c);
  }
}

/**
 * Pool config from environment variables (DARTFLOW_ENV_KIND, _SLOTS, _PROFILE, _TIME_SCALE,
 * _BERNOULLI_REWARD, _URL, _TOKEN; for `osworld` the DARTFLOW_OSWORLD_* variables of docs/osworld.md).
 */
export function envPoolConfigFromEnv(env: NodeJS.ProcessEnv = process.env): EnvPoolConfig {
  const kind = env.DARTFLOW_ENV_KIND ?? 'browser';
  const slots = env.DARTFLOW_ENV_SLOTS ? Number(env.DARTFLOW_ENV_SLOTS) : undefined;
  const base = { ...(slots !== undefined ? { slots } : {}) };
  if (kind === 'simulated')
    return {
      kind,
      ...base,
      ...(env.DARTFLOW_ENV_PROFILE ? { profile: env.DARTFLOW_ENV_PROFILE } : {}),
      ...(env.DARTFLOW_ENV_TIME_SCALE ? { timeScale: Number(env.DARTFLOW_ENV_TIME_SCALE) } : {}),
      ...(env.DARTFLOW_ENV_BERNOULLI_REWARD ? { bernoulliReward: Number(env.DARTFLOW_ENV_BERNOULLI_REWARD) } : {}),
    };
  if (kind === 'remote') {
    if (!env.DARTFLOW_ENV_URL)
      throw new Error(
        'DARTFLOW_ENV_URL must be set for DARTFLOW_ENV_KIND=remote (the env server, docs/env-protocol.openapi.yaml)'
      );
    return {
      kind,
      ...base,
      url: env.DARTFLOW_ENV_URL,
      ...(env.DARTFLOW_ENV_TOKEN ? { token: env.DARTFLOW_ENV_TOKEN } : {}),
    };
  }
  if (kind === 'osworld') return { kind, ...base, ...osworldOptionsFromEnv(env) };
  if (kind === 'browser') return { kind, ...base };
  throw new Error(`DARTFLOW_ENV_KIND must be browser, simulated, remote or osworld, got "${kind}"`);
}
