/**
 * One Prometheus endpoint per worker process: GET /metrics answers dartflow's registry followed by the
 * Temporal SDK's own metrics, which Core's exporter serves on an internal loopback port
 * (metrics/temporal-runtime.ts) and this server reads on each scrape. So Prometheus scrapes one target
 * per process, and the dartflow families can do what Core's meter cannot (negative gauges, values read
 * at scrape time).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricsRegistry } from './registry';

export interface MetricsServerOptions {
  registry: MetricsRegistry;
  host: string;
  /** 0 = any free port (tests). */
  port: number;
  /** Core's exporter (http://127.0.0.1:<port>/metrics); absent when the Runtime has no Prometheus exporter. */
  temporalUrl?: string;
  /** Async reads done before each render (e.g. the newest checkpoint version), each bounded by `refreshTimeoutMs`. */
  refreshers?: Array<() => Promise<void>>;
  refreshTimeoutMs?: number;
  /** What to name in the "port in use" error: the variable that sets this port. */
  portVariable?: string;
}

export interface MetricsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The port is taken; `message` names the variable to change. */
export class MetricsPortInUseError extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    variable: string
  ) {
    super(
      `metrics port ${host}:${port} is already in use (another dartflow worker?): set ${variable} to a free port, or 0 to turn the endpoint off`
    );
    this.name = 'MetricsPortInUseError';
  }
}

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  new Promise((resolve) => {
    const t = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      () => {
        clearTimeout(t);
        resolve(undefined);
      }
    );
  });

async function temporalText(url: string | undefined, timeoutMs: number): Promise<string> {
  if (!url) return '';
  const body = await withTimeout(
    fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then((r) => (r.ok ? r.text() : undefined)),
    timeoutMs
  );
  // Core's exporter lives with the Temporal Runtime, which stops when the process's last worker does.
  return body === undefined ? '# Temporal SDK metrics unavailable (its runtime is not running)\n' : body;
}

export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const timeoutMs = opts.refreshTimeoutMs ?? 2000;
  const server = http.createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      if (req.method !== 'GET' || (path !== '/metrics' && path !== '/')) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: scrape GET /metrics\n');
        return;
      }
      await Promise.all((opts.refreshers ?? []).map((r) => withTimeout(r(), timeoutMs)));
      const text = opts.registry.render() + (await temporalText(opts.temporalUrl, timeoutMs));
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'cache-control': 'no-store' });
      res.end(text);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new MetricsPortInUseError(opts.host, opts.port, opts.portVariable ?? 'DARTFLOW_METRICS_PORT')
          : err
      )
    );
    server.listen(opts.port, opts.host, () => resolve());
  });
  // A scrape connection must never keep a stopping worker alive.
  server.unref();
  const port = (server.address() as AddressInfo).port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${port}/metrics`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
