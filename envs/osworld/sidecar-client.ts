/**
 * Client of the OSWorld sidecar (python/dartflow_osworld): OSWorld's task setup and evaluator for a
 * leased VM. Its typed errors become dartflow's: a task the sidecar cannot run (unsupported metric,
 * malformed evaluator) is a TaskConfigError; setup, evaluator and VM failures are retryable env errors,
 * so the episode is an infrastructure failure and never a reward.
 */
import { z } from 'zod';
import { EnvCrashedError, EnvProtocolError, EnvUnavailableError, TaskConfigError } from '../errors';
import type { OsworldEnvSettings } from './config';
import type { VmLease } from './env-server';
import { OsworldEvaluatorError, OsworldSetupError } from './errors';
import { jsonOf, send } from './http';

const ErrorSchema = z.object({
  error: z.object({ type: z.string(), message: z.string(), field: z.string().optional() }),
});

export interface SidecarCall {
  lease: VmLease;
  taskId: string;
  envId: string;
}

async function post<T>(
  s: OsworldEnvSettings,
  path: string,
  body: Record<string, unknown>,
  call: SidecarCall,
  schema: z.ZodType<T>,
  timeoutMs: number
): Promise<T> {
  const who = `sidecar ${s.sidecarUrl}`;
  const res = await send({
    method: 'POST',
    url: new URL(path, s.sidecarUrl).href,
    headers: s.sidecarToken ? { authorization: `Bearer ${s.sidecarToken}` } : {},
    json: {
      leaseId: call.lease.emulatorId,
      taskId: call.taskId,
      vm: {
        host: call.lease.host,
        serverPort: call.lease.serverPort,
        chromiumPort: call.lease.chromiumPort,
        vlcPort: call.lease.vlcPort,
      },
      ...body,
    },
    timeoutMs,
    who,
    envId: call.envId,
  });
  const json = await jsonOf(res);
  if (res.ok) {
    const parsed = schema.safeParse(json);
    if (parsed.success) return parsed.data;
    throw new EnvProtocolError(
      `${who}: POST ${path}: unexpected answer ${JSON.stringify(json)?.slice(0, 200)}`,
      call.envId
    );
  }
  const e = ErrorSchema.safeParse(json);
  if (!e.success)
    throw new EnvProtocolError(`${who}: POST ${path}: HTTP ${res.status} without a typed error`, call.envId);
  const { type, message, field } = e.data.error;
  const where = `task ${call.taskId}${field ? `, field ${field}` : ''} (${who}, POST ${path})`;
  switch (type) {
    case 'BadRequest':
    case 'Unsupported':
      throw new TaskConfigError(`${where}: ${message}`);
    case 'SetupFailed':
      throw new OsworldSetupError(`${where}: ${message}`, call.envId);
    case 'EvaluatorError':
      throw new OsworldEvaluatorError(`${where}: ${message}`, call.envId);
    case 'VmUnreachable':
      throw new EnvCrashedError(`${where}: ${message}`, call.envId);
    default:
      throw new EnvUnavailableError(`${where}: ${type}: ${message}`, call.envId);
  }
}

/** Runs the task's `config` setup steps on the VM. */
export async function runTaskSetup(s: OsworldEnvSettings, call: SidecarCall, config: unknown[]): Promise<void> {
  await post(s, '/v1/setup', { config }, call, z.object({ ok: z.literal(true) }).loose(), s.timeouts.setupMs);
}

/** Runs the task's `evaluator` (postconfig, getters, metrics); `lastAction` decides `infeasible` / FAIL. */
export async function runEvaluator(
  s: OsworldEnvSettings,
  call: SidecarCall,
  evaluator: unknown,
  lastAction: string | null
): Promise<number> {
  const r = await post(
    s,
    '/v1/evaluate',
    { evaluator, lastAction },
    call,
    z.object({ reward: z.number().finite() }),
    s.timeouts.evaluateMs
  );
  return r.reward;
}
