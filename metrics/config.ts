/**
 * Where a worker process serves /metrics. Pure: reads an env object, returns a decision.
 *
 *   DARTFLOW_METRICS_PORT       this process's port; 0 = no endpoint. Chosen by the user, so a busy
 *                               port is an error that stops the worker.
 *   DARTFLOW_METRICS_BASE_PORT  base of the default ports (9470): base + role offset + instance. A busy
 *                               default port only warns: nobody chose it, and metrics are never worth
 *                               a worker that does not run.
 *   DARTFLOW_METRICS_INSTANCE   the instance index added to the default (set by `dartflow workers` for
 *                               its second env worker, policy server, …).
 *   DARTFLOW_METRICS_HOST       bind address (127.0.0.1; 0.0.0.0 to let a Prometheus elsewhere scrape).
 *
 * Under `npm test` (DARTFLOW_TEST=1) there is no default endpoint: the test clusters must not take the
 * ports of the workers a developer is running. An explicit DARTFLOW_METRICS_PORT still counts.
 */

export type MetricsRole = 'orchestrator' | 'trainer' | 'policy' | 'vllm-policy' | 'env';

export const DEFAULT_METRICS_BASE_PORT = 9470;

/** Default port = base + offset + instance; each role has room for `size` instances on one machine. */
export const ROLE_PORTS: Record<MetricsRole, { offset: number; size: number }> = {
  orchestrator: { offset: 0, size: 1 },
  trainer: { offset: 1, size: 9 },
  policy: { offset: 10, size: 20 },
  env: { offset: 30, size: 20 },
  'vllm-policy': { offset: 50, size: 10 },
};

export interface MetricsEndpointConfig {
  host: string;
  port: number;
  /** True when the user chose the port (busy = error); false for a derived default (busy = warning). */
  explicit: boolean;
}

function intVar(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return n;
}

/** The endpoint of this process, or undefined when metrics are off. */
export function metricsEndpointConfig(
  role: MetricsRole,
  env: NodeJS.ProcessEnv = process.env
): MetricsEndpointConfig | undefined {
  const host = env.DARTFLOW_METRICS_HOST?.trim() || '127.0.0.1';
  const port = intVar(env, 'DARTFLOW_METRICS_PORT', 0, 65535);
  if (port !== undefined) return port === 0 ? undefined : { host, port, explicit: true };
  if (env.DARTFLOW_TEST === '1') return undefined;
  const base = intVar(env, 'DARTFLOW_METRICS_BASE_PORT', 1, 65535) ?? DEFAULT_METRICS_BASE_PORT;
  const instance = intVar(env, 'DARTFLOW_METRICS_INSTANCE', 0, 1000) ?? 0;
  const { offset, size } = ROLE_PORTS[role];
  if (instance >= size)
    throw new Error(
      `DARTFLOW_METRICS_INSTANCE=${instance}: only ${size} ${role} processes get a default metrics port; set DARTFLOW_METRICS_PORT for this one`
    );
  const derived = base + offset + instance;
  if (derived > 65535) throw new Error(`DARTFLOW_METRICS_BASE_PORT=${base} puts the ${role} port above 65535`);
  return { host, port: derived, explicit: false };
}
