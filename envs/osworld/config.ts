/**
 * Settings of the `osworld` env kind. Defaults are DART-GUI's (dart-spec.md §2.1, §2.2, §2.7); tests
 * shrink the waits. Read from DARTFLOW_OSWORLD_* variables by `osworldOptionsFromEnv`.
 */
import { z } from 'zod';

const ms = z.number().int().min(0);

export const OsworldEnvOptionsSchema = z.object({
  /** GUI-Docker-Env control servers, tried in order (DART's comma-separated OSWORLD_BASE_URL). */
  envServerUrls: z.array(z.url()).min(1),
  /** The token whose concurrency quota the leases count against (`tokens:` in GE's config.yaml). */
  token: z.string().min(1),
  /** The sidecar that runs OSWorld's setup and evaluators (python -m dartflow_osworld). */
  sidecarUrl: z.url(),
  sidecarToken: z.string().min(1).optional(),
  /** Host under which the VM's mapped ports are reached; default: the host of the env server that leased it. */
  vmHost: z.string().min(1).optional(),
  screen: z
    .object({ width: z.number().int().min(1), height: z.number().int().min(1) })
    .default({ width: 1920, height: 1080 }),
  /** Sleep after an action before the next screenshot (DesktopEnv.step `pause` = 2 s; WAIT sleeps it twice). */
  pauseMs: ms.default(2_000),
  /** Sleep after task setup before the first screenshot (trajectory_runner.py: 60 s). */
  settleMs: ms.default(60_000),
  /** Whole env inits (lease + setup) per reset (runner.env.max_retries = 3), VM released between them. */
  initAttempts: z.number().int().min(1).max(10).default(3),
  initRetryDelayMs: ms.default(5_000),
  timeouts: z
    .object({
      /** GET /tokens. */
      quotaMs: ms.default(10_000),
      /**
       * POST /start_emulator. DART's client gives up after 30 s although the server waits up to 300 s for
       * the VM; a lease that completes after the client gave up is a VM nobody releases, so the default
       * outwaits the server.
       */
      startMs: ms.default(330_000),
      releaseMs: ms.default(30_000),
      /** The VM's GET /screenshot (OSWorld's controller: 10 s, 3 tries). */
      screenshotMs: ms.default(10_000),
      /** The VM's POST /execute (OSWorld's controller: 90 s, 3 tries 5 s apart). */
      executeMs: ms.default(90_000),
      setupMs: ms.default(900_000),
      evaluateMs: ms.default(600_000),
    })
    .prefault({}),
  /** Tries of a VM request (screenshot, execute) and the wait between them (OSWorld: 3, 5 s). */
  vmTries: z.number().int().min(1).max(10).default(3),
  vmRetryDelayMs: ms.default(5_000),
});
export type OsworldEnvOptions = z.input<typeof OsworldEnvOptionsSchema>;
export type OsworldEnvSettings = z.output<typeof OsworldEnvOptionsSchema>;

/** The env-var names, documented in docs/osworld.md. */
export const OSWORLD_ENV_VARS = {
  envServerUrls: 'DARTFLOW_OSWORLD_ENV_SERVERS',
  token: 'DARTFLOW_OSWORLD_TOKEN',
  sidecarUrl: 'DARTFLOW_OSWORLD_SIDECAR_URL',
  sidecarToken: 'DARTFLOW_OSWORLD_SIDECAR_TOKEN',
  vmHost: 'DARTFLOW_OSWORLD_VM_HOST',
  pauseMs: 'DARTFLOW_OSWORLD_PAUSE_MS',
  settleMs: 'DARTFLOW_OSWORLD_SETTLE_MS',
} as const;

/** Options from DARTFLOW_OSWORLD_* variables; errors name the variable. */
export function osworldOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): OsworldEnvOptions {
  const need = (key: keyof typeof OSWORLD_ENV_VARS): string => {
    const v = env[OSWORLD_ENV_VARS[key]];
    if (!v) throw new Error(`${OSWORLD_ENV_VARS[key]} must be set for DARTFLOW_ENV_KIND=osworld (docs/osworld.md)`);
    return v;
  };
  const num = (key: 'pauseMs' | 'settleMs'): number | undefined => {
    const raw = env[OSWORLD_ENV_VARS[key]];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0)
      throw new Error(`${OSWORLD_ENV_VARS[key]} must be a whole number of ms, got "${raw}"`);
    return n;
  };
  const pauseMs = num('pauseMs');
  const settleMs = num('settleMs');
  const sidecarToken = env[OSWORLD_ENV_VARS.sidecarToken];
  const vmHost = env[OSWORLD_ENV_VARS.vmHost];
  return {
    envServerUrls: need('envServerUrls')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    token: need('token'),
    sidecarUrl: need('sidecarUrl'),
    ...(sidecarToken ? { sidecarToken } : {}),
    ...(vmHost ? { vmHost } : {}),
    ...(pauseMs !== undefined ? { pauseMs } : {}),
    ...(settleMs !== undefined ? { settleMs } : {}),
  };
}

/** Parses options; a bad value is an error naming the option (zod path). */
export function parseOsworldOptions(o: OsworldEnvOptions): OsworldEnvSettings {
  const r = OsworldEnvOptionsSchema.safeParse(o);
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`invalid osworld env options: ${msg}`);
  }
  return r.data;
}
