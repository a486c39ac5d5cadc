/**
 * One HTTP request and its whole answer as text, over node:http with a keep-alive agent. The policy
 * client's calls go through here rather than `fetch`: in profiles of env workers at 512 simulated envs,
 * fetch's machinery (undici's request objects, web streams, abort-signal plumbing) was the largest item
 * of their CPU, for requests whose answers are a few hundred bytes of JSON. Node's agent drops an idle
 * socket before the server's announced keep-alive timeout, so a reused socket is not one the server is
 * closing.
 */
import http from 'node:http';
import https from 'node:https';

export interface HttpAnswer {
  status: number;
  text: string;
}

/** The request did not complete within its time budget. */
export class HttpTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`timed out after ${timeoutMs} ms`);
    this.name = 'HttpTimeoutError';
  }
}

export interface HttpExchangeOptions {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: Uint8Array | string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** Keep-alive agents for http: and https: URLs (one pair per caller, e.g. per policy client). */
export class HttpAgents {
  readonly http = new http.Agent({ keepAlive: true });
  readonly https = new https.Agent({ keepAlive: true });

  destroy(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

/**
 * Sends `opts` to `url` and resolves with the status and body once the answer is complete. Rejects with
 * HttpTimeoutError after `timeoutMs`, with the signal's reason when it aborts, and with the socket's error
 * (its `code`, e.g. ECONNREFUSED, kept) otherwise.
 */
export function httpExchange(url: string, opts: HttpExchangeOptions, agents: HttpAgents): Promise<HttpAnswer> {
  return new Promise<HttpAnswer>((resolve, reject) => {
    opts.signal?.throwIfAborted();
    const target = new URL(url);
    const secure = target.protocol === 'https:';
    const headers: Record<string, string | number> = { ...opts.headers };
    if (opts.body !== undefined) headers['content-length'] = Buffer.byteLength(opts.body);
    const req = (secure ? https : http).request(
      target,
      { method: opts.method, headers, agent: secure ? agents.https : agents.http },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', fail);
        res.on('end', () => {
          done();
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
        });
      }
    );
    const timer = setTimeout(() => req.destroy(new HttpTimeoutError(opts.timeoutMs)), opts.timeoutMs);
    const onAbort = () => req.destroy(opts.signal?.reason as Error);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    function done() {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
    function fail(err: Error) {
      done();
      reject(err);
    }
    req.on('error', fail);
    req.end(opts.body);
  });
}
