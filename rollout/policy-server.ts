/**
 * The policy server's HTTP face (node:http; JSON, or the binary act body of rollout/api.ts): POST /v1/act
 * and GET /v1/health over a PolicyEngine.
 * Binds 127.0.0.1 unless told otherwise (the token is the only protection; exposing the port is a
 * deliberate choice). Bodies are size-capped, validated with zod, and every error answer says whether
 * a retry can help, so clients fail over on 503 but not on a malformed request.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { ObjectNotFoundError, StorageUnavailableError, CorruptObjectError } from '../storage/errors';
import type { ObjectStore } from '../storage/object-store';
import { ActCallSchema, BINARY_ACT_CONTENT_TYPE, type ActResponse, type ErrorBody } from './api';
import { BatcherClosedError, BatcherOverloadedError } from './batcher';
import {
  BadActRequestError,
  PolicyEngine,
  NetworkChangedError,
  PolicyNotReadyError,
  type ActAnswer,
  type EngineObservation,
} from './engine';
import { decodeEncodedScreenshot, TensorSection, unpackBinaryActCall } from './act-wire';
import { BodyPool, type PooledBuffer } from './body-pool';
import { bearerMatches } from './token';

export interface PolicyHttpOptions {
  engine: PolicyEngine;
  token: string;
  /** Used to fetch observations sent by `screenshotKey`. */
  store?: ObjectStore;
  host?: string;
  /** 0 = any free port. */
  port?: number;
  maxBodyBytes?: number;
}

export interface RunningPolicyServer {
  url: string;
  port: number;
  engine: PolicyEngine;
  server: http.Server;
  /** Stops listening and closes idle connections; in-flight requests finish. Does not close the engine. */
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable: boolean
  ) {
    super(message);
  }
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/**
 * Reads the whole body, refusing more than `limit` bytes. With a Content-Length (the normal case) the
 * bytes go straight into a pooled buffer; the caller must release it when done with every view of it.
 */
function readBody(req: http.IncomingMessage, limit: number, pool: BodyPool): Promise<PooledBuffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isSafeInteger(declared) && declared > limit) {
      reject(new HttpError(413, 'too_large', `request body exceeds ${limit} bytes`, false));
      req.destroy();
      return;
    }
    const target = Number.isSafeInteger(declared) && declared >= 0 ? pool.acquire(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (err: unknown) => {
      target?.release();
      reject(err);
    };
    req.on('data', (c: Buffer) => {
      if (target) {
        // node:http frames the body by Content-Length, so it never delivers more than declared.
        c.copy(target.bytes, size);
        size += c.length;
        return;
      }
      size += c.length;
      if (size > limit) {
        fail(new HttpError(413, 'too_large', `request body exceeds ${limit} bytes`, false));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!target) return resolve({ bytes: Buffer.concat(chunks), release: () => undefined });
      if (size !== target.bytes.byteLength)
        return fail(
          new HttpError(400, 'bad_request', `body has ${size} bytes, Content-Length says ${declared}`, false)
        );
      resolve(target);
    });
    req.on('error', fail);
  });
}

/** Maps engine/storage errors to HTTP answers. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof BadActRequestError) return new HttpError(400, err.code, err.message, false);
  if (err instanceof PolicyNotReadyError) return new HttpError(503, 'not_ready', err.message, true);
  if (err instanceof NetworkChangedError) return new HttpError(503, 'network_changed', err.message, true);
  if (err instanceof BatcherOverloadedError) return new HttpError(503, 'overloaded', err.message, true);
  if (err instanceof BatcherClosedError) return new HttpError(503, 'shutting_down', err.message, true);
  if (err instanceof ObjectNotFoundError) return new HttpError(400, 'screenshot_not_found', err.message, false);
  if (err instanceof CorruptObjectError) return new HttpError(400, 'screenshot_corrupt', err.message, false);
  if (err instanceof StorageUnavailableError) return new HttpError(503, 'storage_unavailable', err.message, true);
  return new HttpError(500, 'internal', err instanceof Error ? err.message : String(err), true);
}

type WireObservation = z.infer<typeof ActCallSchema>['requests'][number]['observation'];

async function resolveObservation(
  o: WireObservation,
  field: string,
  imageSize: number,
  tensors: TensorSection,
  store: ObjectStore | undefined
): Promise<EngineObservation> {
  const rest = {
    instruction: o.instruction,
    fields: o.fields,
    ...(o.mask ? { mask: o.mask } : {}),
    ...(o.previous ? { previous: o.previous } : {}),
  };
  if (o.encoded !== undefined)
    return { ...decodeEncodedScreenshot(o.encoded, imageSize, `${field}.encoded`, tensors), ...rest };
  let png: Uint8Array;
  if (o.pngBase64 !== undefined) {
    png = Buffer.from(o.pngBase64, 'base64');
  } else {
    if (!store) throw new HttpError(400, 'bad_request', 'this server has no store: send pngBase64', false);
    const key = o.screenshotKey!;
    // The key is the content hash, so the read is verified against it.
    png = await store.getBytes(key, key.slice('screenshots/'.length, -'.png'.length));
  }
  return { png, ...rest };
}

/** The body as {header, tensors}: JSON, or the binary form whose float32 data stays in the body buffer. */
function parseActBody(req: http.IncomingMessage, body: Buffer): { raw: unknown; tensors: TensorSection } {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === BINARY_ACT_CONTENT_TYPE) {
    const { header, tensors } = unpackBinaryActCall(body);
    return { raw: header, tensors };
  }
  try {
    return { raw: JSON.parse(body.toString('utf8')), tensors: new TensorSection(undefined) };
  } catch {
    throw new HttpError(400, 'bad_json', 'request body is not JSON', false);
  }
}

async function handleAct(req: http.IncomingMessage, opts: PolicyHttpOptions, pool: BodyPool): Promise<unknown> {
  const body = await readBody(req, opts.maxBodyBytes ?? 64 * 1024 * 1024, pool);
  try {
    const { raw, tensors } = parseActBody(req, body.bytes);
    const parsed = ActCallSchema.safeParse(raw);
    if (!parsed.success) {
      const i = parsed.error.issues[0];
      throw new HttpError(
        400,
        'bad_request',
        `invalid act request at ${i?.path.join('.') ?? ''}: ${i?.message ?? ''}`,
        false
      );
    }
    // One network for the whole call: a reload to another architecture meanwhile answers 503 network_changed.
    const net = opts.engine.network;
    const imageSize = net.spec.imageSize;
    // Encoded observations take their data from the tensor section in request order: resolveObservation
    // does that before its first await, so the calls below take it in map order.
    const observations = await Promise.all(
      parsed.data.requests.map((r, i) =>
        resolveObservation(r.observation, `requests.${i}.observation`, imageSize, tensors, opts.store)
      )
    );
    if (tensors.leftover > 0)
      throw new BadActRequestError(
        `the body's tensor section has ${tensors.leftover} bytes more than its encoded observations need (3×${imageSize}×${imageSize} float32 each)`,
        'bad_encoded_observation'
      );
    // All observations of one call are submitted in the same tick, so they land in the same batch.
    // Settled, not Promise.all: the body may go back to the pool only when no queued row still views it.
    const settled = await Promise.allSettled(
      parsed.data.requests.map((r, i) =>
        opts.engine
          .act(
            observations[i]!,
            {
              seed: r.seed,
              temperature: r.temperature,
              ...(r.greedy !== undefined ? { greedy: r.greedy } : {}),
            },
            net
          )
          .catch((err: unknown) => {
            // The engine does not know where in the call the request was; say it.
            if (err instanceof BadActRequestError && !err.message.startsWith('requests.'))
              throw new BadActRequestError(`requests.${i}: ${err.message}`, err.code);
            throw err;
          })
      )
    );
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const answers = settled.map((r) => (r as PromiseFulfilledResult<ActAnswer>).value);
    const response: ActResponse = { answers, inputSize: imageSize };
    return response;
  } finally {
    body.release();
  }
}

export function createPolicyHttpServer(opts: PolicyHttpOptions): http.Server {
  const pool = new BodyPool();
  return http.createServer((req, res) => {
    void (async () => {
      try {
        if (!bearerMatches(req.headers.authorization, opts.token)) {
          res.setHeader('www-authenticate', 'Bearer');
          throw new HttpError(401, 'unauthorized', 'a valid bearer token is required', false);
        }
        const url = new URL(req.url ?? '/', 'http://localhost');
        if (req.method === 'GET' && url.pathname === '/v1/health') return send(res, 200, opts.engine.health());
        if (req.method === 'POST' && url.pathname === '/v1/act')
          return send(res, 200, await handleAct(req, opts, pool));
        throw new HttpError(404, 'not_found', `no route ${req.method ?? ''} ${url.pathname}`, false);
      } catch (err) {
        const e = toHttpError(err);
        const body: ErrorBody = { error: e.message, code: e.code, retryable: e.retryable };
        if (!res.headersSent) send(res, e.status, body);
        else res.destroy();
      }
    })();
  });
}

/** Creates the HTTP server and listens (127.0.0.1 and a free port by default). */
export async function startPolicyHttpServer(opts: PolicyHttpOptions): Promise<RunningPolicyServer> {
  const server = createPolicyHttpServer(opts);
  // Keep-alive connections from many env workers are the normal case; keep them longer than the
  // client's idle sockets live so the server never closes one a client is about to reuse.
  server.keepAliveTimeout = 65_000;
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    engine: opts.engine,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
