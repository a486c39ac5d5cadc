/**
 * The dartflow env protocol (v1), JSON over HTTP — documented in docs/env-protocol.openapi.yaml.
 * Shared by the client (envs/remote/client.ts) and the server (envs/remote-server.ts). An OSWorld
 * sidecar can serve the same endpoints around DesktopEnv.
 */
import { z } from 'zod';
import { CanonicalActionSchema } from '../../schemas/actions';

export const PROTOCOL_VERSION = 'v1';

export const ObservationWireSchema = z.object({
  pngBase64: z.string(),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
});

export const CreateEnvRequestSchema = z.object({
  /** How long the server may wait for a free slot before answering 503 no_capacity. */
  waitMs: z.number().int().min(0).max(600_000).default(0),
});
export const CreateEnvResponseSchema = z.object({
  envId: z.string().min(1),
  kind: z.string(),
  screen: z.object({ width: z.number().int().positive(), height: z.number().int().positive() }),
  actionFormats: z.array(z.string()),
});

export const ResetRequestSchema = z.object({ task: z.unknown(), seed: z.number().int().min(0) });
export const ResetResponseSchema = z.object({
  instruction: z.string(),
  fields: z.array(z.string()),
  observation: ObservationWireSchema,
});

export const StepRequestSchema = z.object({ action: CanonicalActionSchema });
export const StepResponseSchema = z.object({ done: z.boolean(), actionOk: z.boolean(), error: z.string().optional() });
export const EvaluateResponseSchema = z.object({
  reward: z.number(),
  done: z.boolean(),
  reason: z.string().optional(),
});
export const OracleResponseSchema = z.object({ action: CanonicalActionSchema.nullable() });
export const HealthResponseSchema = z.object({
  ok: z.boolean(),
  version: z.string(),
  kind: z.string(),
  slots: z.number().int(),
  busy: z.number().int(),
  leases: z.number().int(),
});

export const ERROR_TYPES = [
  'BadRequest',
  'Unauthorized',
  'NotFound',
  'NoCapacity',
  'TaskConfigError',
  'EnvCrashedError',
  'EnvTimeoutError',
  'EnvUnavailableError',
  'Internal',
] as const;
export const ErrorResponseSchema = z.object({
  error: z.object({ type: z.enum(ERROR_TYPES), message: z.string(), retryable: z.boolean() }),
});
export type ErrorType = (typeof ERROR_TYPES)[number];
export const ReleaseResponseSchema = z.object({ released: z.boolean() });
