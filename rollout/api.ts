/**
 * Wire format of the policy server's HTTP API (JSON), shared by server and client. Node-free.
 *
 *   POST /v1/act    {requests: ActRequest[]}  → {answers: ActAnswer[]}
 *   GET  /v1/health                           → Health
 * Every route needs `Authorization: Bearer <token>`.
 */
import { z } from 'zod';
import { CanonicalActionSchema } from '../schemas/actions';

/** At most this many observations per HTTP call (the batcher regroups them anyway). */
export const MAX_REQUESTS_PER_CALL = 256;

export const ActObservationSchema = z
  .object({
    /** The screenshot inline (base64 PNG)… */
    pngBase64: z.string().min(1).max(16_000_000).optional(),
    /** …or by its content-addressed key in the store (`screenshots/<sha256>.png`). */
    screenshotKey: z
      .string()
      .regex(/^screenshots\/[0-9a-f]{64}\.png$/, 'a content-addressed screenshot key')
      .optional(),
    instruction: z.string().max(10_000),
    fields: z.array(z.string().max(10_000)).max(64).default([]),
    /** Extra validity mask (true = allowed), ANDed with the task's own. */
    mask: z.array(z.boolean()).max(65_536).optional(),
  })
  .refine((o) => (o.pngBase64 === undefined) !== (o.screenshotKey === undefined), {
    message: 'exactly one of pngBase64 and screenshotKey is required',
  });

export const ActRequestSchema = z.object({
  observation: ActObservationSchema,
  seed: z.number().int().min(0).max(0xffffffff),
  temperature: z.number().positive().max(100).default(1),
  greedy: z.boolean().optional(),
});
export type ActRequest = z.input<typeof ActRequestSchema>;

export const ActCallSchema = z.object({ requests: z.array(ActRequestSchema).min(1).max(MAX_REQUESTS_PER_CALL) });

export const ActAnswerSchema = z.object({
  actionIndex: z.number().int().nonnegative(),
  action: CanonicalActionSchema,
  actionText: z.string(),
  logProb: z.number(),
  entropy: z.number().nonnegative(),
  policyVersion: z.number().int().nonnegative(),
  serverId: z.string(),
});
export type ActAnswerWire = z.infer<typeof ActAnswerSchema>;
export const ActResponseSchema = z.object({ answers: z.array(ActAnswerSchema) });

export const HealthSchema = z.object({
  serverId: z.string(),
  campaignId: z.string().nullable(),
  version: z.number().int().nonnegative().nullable(),
  specHash: z.string(),
  queueDepth: z.number().int().nonnegative(),
  inFlight: z.number().int().nonnegative(),
  loading: z.object({ campaignId: z.string(), version: z.number().int() }).nullable(),
  lastReloadError: z.string().nullable(),
  batches: z.number().int().nonnegative(),
  items: z.number().int().nonnegative(),
  maxBatch: z.number().int().positive(),
});
export type Health = z.infer<typeof HealthSchema>;

/** Error body of every non-200 answer. `retryable` tells the client whether another try (here or elsewhere) can help. */
export const ErrorBodySchema = z.object({ error: z.string(), code: z.string(), retryable: z.boolean() });
export type ErrorBody = z.infer<typeof ErrorBodySchema>;
