/**
 * The HTTP front of one vLLM server: env workers talk to it, never to vLLM directly. It
 * - checks the bearer token (rollout/token.ts, the same token as the embedded policy servers);
 * - forwards POST /v1/chat/completions through the serving gate (requests wait while a reload runs),
 *   forcing per-token logprobs as token ids, and stamps the answer with the version that produced it
 *   (`dartflow_version` in the JSON, `x-dartflow-version` header);
 * - validates vLLM's answer (MalformedAnswerError → 502 `malformed_upstream`);
 * - answers GET /load (and /v1/load) with its in-flight count, for least-loaded routing;
 * - refuses with a typed error when it cannot serve: 503 `upstream_unavailable` (vLLM down),
 *   503 `reload_timeout`, 503 `server_broken`, 502 `upstream_error` (vLLM 5xx), 504 `upstream_timeout`;
 *   vLLM's 4xx (e.g. a prompt over the context length) pass through as `upstream_rejected`.
 * Every error body is `{ "error": { "type", "message" } }` with the type also in `x-dartflow-error`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { bearerMatches } from '../token';
import {
  InvalidChatRequestError,
  MalformedAnswerError,
  prepareChatRequest,
  stampAnswer,
  validateChatAnswer,
} from './chat-answer';
import { GateTimeoutError, type ServingGate } from './serving-gate';
import type { VllmControl } from './vllm-control';

export type FrontErrorType =
  | 'unauthorized'
  | 'not_found'
  | 'invalid_request'
  | 'body_too_large'
  | 'upstream_unavailable'
  | 'upstream_timeout'
  | 'upstream_error'
  | 'upstream_rejected'
  | 'malformed_upstream'
  | 'reload_timeout'
  | 'server_broken'
  | 'client_closed';

export interface LoadReport {
  serverId: string;
  inFlight: number;
  /** In flight for clients other than the one asking (`/load?client=<id>`; its requests carry `x-dartflow-client`). */
  inFlightOthers: number;
  holding: boolean;
  version: number;
  campaignId: string | null;
  healthy: boolean;
}

export interface VllmFrontOptions {
  serverId: string;
  token: string;
  gate: ServingGate;
  control: VllmControl;
  host?: string;
  /** 0 or unset: a free port. */
  port?: number;
  /** Per request, vLLM's answer included (default 10 min: long generations on CPU). */
  requestTimeoutMs?: number;
  /** How long a request waits at a closed gate (default 5 min: a reload drains first). */
  maxHoldMs?: number;
  /** Default 64 MiB (several base64 screenshots). */
  maxBodyBytes?: number;
  /** How often /load may re-probe vLLM's /health (default 2 s; tests shorten it). */
  healthProbeEveryMs?: number;
}

export interface VllmFront {
  /** http://host:port (the OpenAI base URL is `${url}/v1`). */
  url: string;
  port: number;
  load(clientId?: string): Promise<LoadReport>;
  /** Answered chat requests so far and their summed time in the front and in vLLM (ms): where requests wait. */
  stats(): FrontStats;
  close(): Promise<void>;
}

export interface FrontStats {
  answered: number;
  /** Request received → answer sent, summed. */
  frontMs: number;
  /** The forward to vLLM (sent → answer read), summed. */
  upstreamMs: number;
}

class FrontError extends Error {
  constructor(
    readonly status: number,
    readonly type: FrontErrorType,
    message: string
  ) {
    super(message);
  }
}

async function readBody(req: http.IncomingMessage, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > max) throw new FrontError(413, 'body_too_large', `request body over ${max} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

export async function startVllmFront(o: VllmFrontOptions): Promise<VllmFront> {
  const { gate, control } = o;
  const requestTimeoutMs = o.requestTimeoutMs ?? 600_000;
  const maxHoldMs = o.maxHoldMs ?? 300_000;
  const maxBody = o.maxBodyBytes ?? 64 * 1024 * 1024;
  // Last known vLLM health: a failed forward marks it down at once; /load re-probes at most every 2 s.
  let healthy = true;
  let probedAt = 0;
  let probing: Promise<void> | undefined;
  /** Probes in a row that vLLM did not answer in time. */
  let slowProbes = 0;
  /** Requests inside the gate per client (`x-dartflow-client`), so /load can leave the asker's own out. */
  const byClient = new Map<string, number>();
  const stats: FrontStats = { answered: 0, frontMs: 0, upstreamMs: 0 };

  /**
   * The last known health, re-probed in the background (at most every 2 s). /load never waits for vLLM:
   * routers ask it before every pick, and a vLLM API server busy preparing images can take longer to
   * answer /health than a router waits for /load — which took healthy servers out of rotation. For the
   * same reason a probe vLLM answers late is not a failure: only three late in a row (≈ 6 s without an
   * answer) or a refusal mark it down.
   */
  function probe(): boolean {
    if (!probing && Date.now() - probedAt > (o.healthProbeEveryMs ?? 2000)) {
      probedAt = Date.now();
      probing = control
        .health(1500)
        .then((state) => {
          slowProbes = state === 'slow' ? slowProbes + 1 : 0;
          if (state !== 'slow') healthy = state === 'up';
          else if (slowProbes >= 3) healthy = false;
        })
        .catch(() => undefined) // a probe that throws says nothing new; the next one asks again
        .finally(() => {
          probing = undefined;
        });
    }
    return healthy;
  }

  async function load(clientId?: string): Promise<LoadReport> {
    const up = probe();
    const own = clientId ? (byClient.get(clientId) ?? 0) : 0;
    return {
      serverId: o.serverId,
      inFlight: gate.inFlight,
      inFlightOthers: Math.max(0, gate.inFlight - own),
      holding: gate.holding,
      version: gate.served.version,
      campaignId: gate.served.campaignId,
      healthy: up && !gate.broken,
    };
  }

  async function chat(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const receivedAt = performance.now();
    const raw = await readBody(req, maxBody);
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new FrontError(400, 'invalid_request', 'the body is not JSON');
    }
    if (gate.broken) throw new FrontError(503, 'server_broken', gate.broken);
    let served;
    try {
      served = await gate.enter(maxHoldMs);
    } catch (err) {
      if (err instanceof GateTimeoutError) throw new FrontError(503, 'reload_timeout', err.message);
      throw err;
    }
    const header = req.headers['x-dartflow-client'];
    const clientId = typeof header === 'string' && header.length <= 64 ? header : undefined;
    if (clientId) byClient.set(clientId, (byClient.get(clientId) ?? 0) + 1);
    try {
      let body;
      try {
        body = prepareChatRequest(parsed, served);
      } catch (err) {
        if (err instanceof InvalidChatRequestError) throw new FrontError(400, 'invalid_request', err.message);
        throw err;
      }
      // Abort vLLM's generation when the client goes away (its slot is worth more to the next request).
      const ac = new AbortController();
      const onClose = () => {
        if (!res.writableFinished) ac.abort();
      };
      res.once('close', onClose);
      const timeout = AbortSignal.timeout(requestTimeoutMs);
      let upstream: Response;
      let text: string;
      const forwardedAt = performance.now();
      try {
        upstream = await fetch(`${control.baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(control.apiKey ? { authorization: `Bearer ${control.apiKey}` } : {}),
          },
          body: JSON.stringify(body),
          signal: AbortSignal.any([ac.signal, timeout]),
        });
        text = await upstream.text();
      } catch (err) {
        // The client went away: nothing to answer, and no sign that vLLM is down.
        if (ac.signal.aborted) throw new FrontError(499, 'client_closed', 'the client closed the request');
        if (timeout.aborted)
          throw new FrontError(504, 'upstream_timeout', `vLLM did not answer within ${requestTimeoutMs} ms`);
        healthy = false;
        probedAt = Date.now();
        throw new FrontError(
          503,
          'upstream_unavailable',
          `vLLM at ${control.baseUrl} is unreachable: ${(err as Error).message}`
        );
      } finally {
        res.removeListener('close', onClose);
      }
      const answeredAt = performance.now();
      // vLLM answered: up, and earlier late probes no longer count towards "down".
      healthy = true;
      slowProbes = 0;
      if (!upstream.ok) {
        if (upstream.status >= 500)
          throw new FrontError(502, 'upstream_error', `vLLM answered HTTP ${upstream.status}: ${text.slice(0, 500)}`);
        throw new FrontError(upstream.status, 'upstream_rejected', `vLLM refused the request: ${text.slice(0, 500)}`);
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
        validateChatAnswer(json);
      } catch (err) {
        const why = err instanceof MalformedAnswerError ? err.message : `not JSON (${text.slice(0, 100)})`;
        throw new FrontError(502, 'malformed_upstream', why);
      }
      const stamped = stampAnswer(json as Record<string, unknown>, served, o.serverId);
      send(res, 200, stamped, { 'x-dartflow-version': String(served.version) });
      stats.answered++;
      stats.upstreamMs += answeredAt - forwardedAt;
      stats.frontMs += performance.now() - receivedAt;
    } finally {
      gate.leave();
      if (clientId) {
        const left = (byClient.get(clientId) ?? 1) - 1;
        if (left > 0) byClient.set(clientId, left);
        else byClient.delete(clientId);
      }
    }
  }

  function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const data = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(data),
      ...headers,
    });
    res.end(data);
  }

  const server = http.createServer((req, res) => {
    void (async () => {
      try {
        const url = new URL(req.url ?? '/', 'http://front');
        if (!bearerMatches(req.headers.authorization, o.token))
          throw new FrontError(401, 'unauthorized', 'missing or wrong bearer token');
        if (req.method === 'POST' && url.pathname === '/v1/chat/completions') return await chat(req, res);
        if (req.method === 'GET' && (url.pathname === '/load' || url.pathname === '/v1/load')) {
          const report = await load(url.searchParams.get('client') ?? undefined);
          return send(res, report.healthy ? 200 : 503, report);
        }
        if (req.method === 'GET' && url.pathname === '/v1/models')
          return send(res, 200, { object: 'list', data: [{ id: control.servedModelName, object: 'model' }] });
        throw new FrontError(404, 'not_found', `${req.method ?? ''} ${url.pathname}`);
      } catch (err) {
        const e =
          err instanceof FrontError
            ? err
            : new FrontError(500, 'upstream_error', err instanceof Error ? err.message : String(err));
        send(res, e.status, { error: { type: e.type, message: e.message } }, { 'x-dartflow-error': e.type });
      }
    })();
  });
  // Screenshot requests can take minutes on CPU: do not let Node's default timeouts cut them.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = o.host && o.host !== '0.0.0.0' ? o.host : '127.0.0.1';
  return {
    url: `http://${host}:${port}`,
    port,
    load,
    stats: () => ({ ...stats }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
