/**
 * `env-server`: serves the dartflow env protocol (envs/remote/protocol.ts, docs/env-protocol.openapi.yaml)
 * for a local env pool (browser by default), so env clusters can run on other machines.
 *
 * Security: binds 127.0.0.1 unless told otherwise and refuses to start without a bearer token
 * (DARTFLOW_ENV_SERVER_TOKEN or --token-file). Leases idle longer than `leaseIdleMs` are reclaimed so a
 * crashed client cannot hold slots forever.
 *
 *   DARTFLOW_ENV_SERVER_TOKEN=… npx tsx envs/remote-server.ts [--port 8790] [--host 127.0.0.1] [--slots 4]
 */
import { timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { z } from 'zod';
import { parseTaskSpec } from '../tasks/loader';
import { TaskConfigError } from '../tasks/errors';
import { EnvError, EnvTimeoutError, EnvUnavailableError } from './errors';
import { createEnvPool } from './pool-factory';
import {
  CreateEnvRequestSchema,
  PROTOCOL_VERSION,
  ResetRequestSchema,
  StepRequestSchema,
  type ErrorType,
} from './remote/protocol';
import type { EnvPool, GuiEnv, Observation } from './types';
import { exitWithParent } from '../infra/parent-watch';

export interface EnvServerOptions {
  pool: EnvPool;
  token: string;
  host?: string;
  port?: number;
  leaseIdleMs?: number;
  maxBodyBytes?: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly retryable = false
  ) {
    super(message);
  }
}

interface Lease {
  env: GuiEnv;
  lastUsed: number;
  busy: boolean;
}

const obsWire = (o: Observation) => ({
  pngBase64: Buffer.from(o.png).toString('base64'),
  width: o.width,
  height: o.height,
});

function errorFor(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (err instanceof TaskConfigError) return new HttpError(422, 'TaskConfigError', err.message);
  if (err instanceof EnvTimeoutError) return new HttpError(504, 'EnvTimeoutError', err.message, true);
  if (err instanceof EnvUnavailableError) return new HttpError(503, 'EnvUnavailableError', err.message, true);
  if (err instanceof EnvError) return new HttpError(500, 'EnvCrashedError', err.message, true);
  return new HttpError(500, 'Internal', err instanceof Error ? err.message : String(err), true);
}

export class EnvServer {
  private server: http.Server | null = null;
  private readonly leases = new Map<string, Lease>();
  private nextLease = 0;
  private reaper: NodeJS.Timeout | null = null;
  private readonly token: Buffer;

  constructor(private readonly opts: EnvServerOptions) {
    if (!opts.token || opts.token.length < 8)
      throw new Error('env-server needs a bearer token of at least 8 characters');
    this.token = Buffer.from(opts.token);
  }

  async listen(): Promise<{ host: string; port: number; url: string }> {
    const host = this.opts.host ?? '127.0.0.1';
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(this.opts.port ?? 0, host, resolve);
    });
    const idle = this.opts.leaseIdleMs ?? 10 * 60_000;
    this.reaper = setInterval(() => void this.reap(idle), Math.min(idle, 30_000));
    this.reaper.unref();
    const port = (this.server.address() as AddressInfo).port;
    return { host, port, url: `http://${host}:${port}` };
  }

  private async reap(idleMs: number): Promise<void> {
    const now = Date.now();
    for (const [id, l] of this.leases) {
      if (!l.busy && now - l.lastUsed > idleMs) {
        this.leases.delete(id);
        await this.opts.pool.release(l.env);
      }
    }
  }

  private authorized(req: http.IncomingMessage): boolean {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const got = Buffer.from(m?.[1] ?? '');
    return got.length === this.token.length && timingSafeEqual(got, this.token);
  }

  private async body(req: http.IncomingMessage): Promise<unknown> {
    const max = this.opts.maxBodyBytes ?? 1_000_000;
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of req) {
      n += (c as Buffer).length;
      if (n > max) throw new HttpError(413, 'BadRequest', `body larger than ${max} bytes`);
      chunks.push(c as Buffer);
    }
    if (n === 0) return {};
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      throw new HttpError(400, 'BadRequest', 'body is not valid JSON');
    }
  }

  private parse<T>(schema: z.ZodType<T>, raw: unknown): T {
    const r = schema.safeParse(raw);
    if (!r.success)
      throw new HttpError(
        400,
        'BadRequest',
        r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')
      );
    return r.data;
  }

  private lease(id: string): Lease {
    const l = this.leases.get(id);
    if (!l) throw new HttpError(404, 'NotFound', `no env ${id} (released, reaped, or the server restarted)`);
    return l;
  }

  /** Serializes calls per lease (an env does one thing at a time) and keeps the lease alive. */
  private async use<T>(id: string, fn: (env: GuiEnv) => Promise<T>): Promise<T> {
    const l = this.lease(id);
    if (l.busy) throw new HttpError(409, 'BadRequest', `env ${id} is busy with another call`);
    l.busy = true;
    try {
      return await fn(l.env);
    } finally {
      l.busy = false;
      l.lastUsed = Date.now();
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    try {
      const url = new URL(req.url ?? '/', 'http://x');
      const parts = url.pathname.split('/').filter(Boolean);
      if (parts[0] !== PROTOCOL_VERSION) throw new HttpError(404, 'NotFound', `unknown path ${url.pathname}`);
      if (!this.authorized(req)) throw new HttpError(401, 'Unauthorized', 'missing or wrong bearer token');
      const method = req.method ?? 'GET';
      const [, coll, id, verb] = parts;
      if (coll === 'health' && method === 'GET') {
        const s = this.opts.pool.stats();
        return send(200, {
          ok: true,
          version: PROTOCOL_VERSION,
          kind: s.kind,
          slots: s.slots,
          busy: s.busy,
          leases: this.leases.size,
        });
      }
      if (coll !== 'envs') throw new HttpError(404, 'NotFound', `unknown path ${url.pathname}`);
      if (!id && method === 'POST') {
        const { waitMs } = this.parse(CreateEnvRequestSchema, await this.body(req));
        const s = this.opts.pool.stats();
        if (waitMs === 0 && s.busy >= s.slots)
          throw new HttpError(503, 'NoCapacity', `all ${s.slots} env slots are leased`, true);
        const env = await this.opts.pool.acquire(AbortSignal.timeout(Math.max(1, waitMs))).catch(() => {
          throw new HttpError(503, 'NoCapacity', `no env slot free within ${waitMs} ms`, true);
        });
        const leaseId = `env-${++this.nextLease}-${Math.random().toString(36).slice(2, 8)}`;
        this.leases.set(leaseId, { env, lastUsed: Date.now(), busy: false });
        return send(201, {
          envId: leaseId,
          kind: env.kind,
          screen: { width: 160, height: 160 },
          actionFormats: ['canonical'],
        });
      }
      if (!id) throw new HttpError(405, 'BadRequest', `${method} /v1/envs is not supported`);
      if (!verb && method === 'DELETE') {
        const l = this.leases.get(id);
        if (l) {
          this.leases.delete(id);
          await this.opts.pool.release(l.env, { broken: url.searchParams.get('broken') === '1' });
        }
        return send(200, { released: Boolean(l) });
      }
      if (verb === 'reset' && method === 'POST') {
        const b = this.parse(ResetRequestSchema, await this.body(req));
        const task = parseTaskSpec(b.task, 'request body field "task"');
        const r = await this.use(id, (env) => env.reset(task, b.seed));
        return send(200, { instruction: r.instruction, fields: r.fields, observation: obsWire(r.observation) });
      }
      if (verb === 'step' && method === 'POST') {
        const b = this.parse(StepRequestSchema, await this.body(req));
        return send(200, await this.use(id, (env) => env.step(b.action)));
      }
      if (verb === 'observation' && method === 'GET')
        return send(200, obsWire(await this.use(id, (env) => env.observe())));
      if (verb === 'evaluate' && method === 'POST') return send(200, await this.use(id, (env) => env.evaluate()));
      if (verb === 'oracle' && method === 'POST') {
        return send(200, { action: await this.use(id, async (env) => (env.oracle ? env.oracle() : null)) });
      }
      throw new HttpError(404, 'NotFound', `unknown path ${method} ${url.pathname}`);
    } catch (err) {
      const e = errorFor(err);
      // A crashed env is released as broken so the pool replaces it; the client's next call gets 404 and re-creates.
      if (e.type === 'EnvCrashedError' || e.type === 'EnvTimeoutError') {
        const id = (req.url ?? '').split('/')[3];
        const l = id ? this.leases.get(id) : undefined;
        if (id && l && !l.busy) {
          this.leases.delete(id);
          await this.opts.pool.release(l.env, { broken: true });
        }
      }
      send(e.status, { error: { type: e.type, message: e.message, retryable: e.retryable } });
    }
  }

  async close(): Promise<void> {
    if (this.reaper) clearInterval(this.reaper);
    for (const [id, l] of this.leases) {
      this.leases.delete(id);
      await this.opts.pool.release(l.env);
    }
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server?.closeAllConnections();
  }
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const tokenFile = arg('token-file') ?? process.env.DARTFLOW_ENV_SERVER_TOKEN_FILE;
  const token = tokenFile ? fs.readFileSync(tokenFile, 'utf8').trim() : process.env.DARTFLOW_ENV_SERVER_TOKEN;
  if (!token)
    throw new Error(
      'set DARTFLOW_ENV_SERVER_TOKEN (or --token-file): the env server never runs without authentication'
    );
  const slots = Number(arg('slots') ?? process.env.DARTFLOW_ENV_SLOTS ?? 4);
  const pool = createEnvPool({ kind: 'browser', slots });
  const server = new EnvServer({ pool, token, host: arg('host') ?? '127.0.0.1', port: Number(arg('port') ?? 8790) });
  const { url } = await server.listen();
  console.log(`[env-server] serving ${slots} browser envs at ${url}/v1 (bearer token required)`);
  const stop = async () => {
    await server.close();
    await pool.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
  // Started by `dartflow env-server` with an IPC channel: a parent killed by -9 takes the server with it.
  exitWithParent(() => void stop());
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(`[env-server] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
