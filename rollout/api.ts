/**
 * Wire format of the policy server's HTTP API (JSON), shared by server and client. Node-free.
 *
 *   POST /v1/act    {requests: ActRequest[]}  → {answers: ActAnswer[], inputSize}
 *   GET  /v1/health                           → Health
 * Every route needs `Authorization: Bearer <token>`.
 *
 * An observation's screenshot comes in one of three forms. `encoded` (the network input, already
 * decoded and downsampled by the sender) is the fast one: the server only checks and packs it. The PNG
 * forms (`pngBase64`, `screenshotKey`) make the server decode and downsample on its request path,
 * which costs several times the forward pass; they stay for compatibility and for senders that do not
 * know the served input size yet (every answer tells them: `inputSize`).
 *
 * The act body is JSON, or — cheaper for encoded observations, whose float32 data would otherwise be
 * base64 inside JSON — the binary form (content type BINARY_ACT_CONTENT_TYPE, all integers little-endian):
 *   "DFA1" | u32 header length H | H bytes of UTF-8 JSON {requests} | zero padding to a multiple of 4 |
 *   the float32 data of every `encoded` observation without `float32Base64`, in request order.
 * (Parsing a 64 KB base64 string inside JSON costs the server more than the forward pass of its sample.)
 */
import { z } from 'zod';
import { CanonicalActionSchema } from '../schemas/actions';

/** At most this many observations per HTTP call (the batcher regroups them anyway). */
export const MAX_REQUESTS_PER_CALL = 256;

/** Content type of the binary act body (see the file comment). */
export const BINARY_ACT_CONTENT_TYPE = 'application/x-dartflow-act';
/** The binary act body's first four bytes. */
export const BINARY_ACT_MAGIC = 'DFA1';

/**
 * The screenshot as the policy's input: `encodeScreenshot(png, {imageSize: size})` of policy/observation.ts,
 * i.e. [3,size,size] float32 in [0,1], channel-major (CHW), little-endian, base64. Sending exactly that
 * encoding keeps the answer identical to the PNG path (and to what the trainer recomputes from the PNG).
 */
export const EncodedScreenshotSchema = z.object({
  /** The screenshot's own size in pixels: the coordinate space of the answer's actionText. */
  width: z.number().int().min(1).max(16_384),
  height: z.number().int().min(1).max(16_384),
  /** Side S of the encoded image; must equal the served policy's input size (the answers' `inputSize`). */
  size: z.number().int().min(1).max(1024),
  /**
   * 3·S·S float32 values, little-endian, base64. Required in a JSON body; in a binary body leave it out
   * and the values are taken from the body's tensor section.
   */
  float32Base64: z.string().min(1).max(16_000_000).optional(),
});
export type EncodedScreenshot = z.infer<typeof EncodedScreenshotSchema>;

export const ActObservationSchema = z
  .object({
    /** The screenshot inline (base64 PNG)… */
    pngBase64: z.string().min(1).max(16_000_000).optional(),
    /** …or by its content-addressed key in the store (`screenshots/<sha256>.png`). */
    screenshotKey: z
      .string()
      .regex(/^screenshots\/[0-9a-f]{64}\.png$/, 'a content-addressed screenshot key')
      .optional(),
    /** …or already encoded by the sender (no decoding on the server: the fast path). */
    encoded: EncodedScreenshotSchema.optional(),
    instruction: z.string().max(10_000),
    fields: z.array(z.string().max(10_000)).max(64).default([]),
    /** Extra validity mask (true = allowed), ANDed with the task's own. */
    mask: z.array(z.boolean()).max(65_536).optional(),
    /**
     * The episode's previous action and whether the screen changed since (the policy input `prev` of a
     * spec with previousAction; the trainer rebuilds the same from steps.jsonl). Absent on the first step.
     */
    previous: z.object({ actionIndex: z.number().int().nonnegative(), changed: z.boolean() }).optional(),
  })
  .refine((o) => [o.pngBase64, o.screenshotKey, o.encoded].filter((x) => x !== undefined).length === 1, {
    message: 'exactly one of encoded, pngBase64 and screenshotKey is required',
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
export const ActResponseSchema = z.object({
  answers: z.array(ActAnswerSchema),
  /** The served policy's input side S: what `encoded.size` must be (optional: older servers omit it). */
  inputSize: z.number().int().positive().optional(),
});
export type ActResponse = z.infer<typeof ActResponseSchema>;

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
