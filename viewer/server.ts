/**
 * The viewer's HTTP server (node:http, no framework): token check, routing, and one error path that
 * turns any failure into a page naming what went wrong. A request can fail; the server never does (every
 * handler's error is caught and rendered). Bound to 127.0.0.1 unless told otherwise.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ObjectStore } from '../storage/object-store';
import { authenticate } from './auth';
import { toViewerError, ViewerError } from './errors';
import { campaignPage } from './pages/campaign';
import { campaignsPage } from './pages/campaigns';
import { groupPage } from './pages/group';
import { searchPage } from './pages/search';
import { taskPage } from './pages/task';
import { errorPage, layout, type Page } from './pages/layout';
import { trajectoryPage } from './pages/trajectory';
import type { TemporalSource } from './temporal-reader';

export interface ViewerOptions {
  store: ObjectStore;
  temporal: TemporalSource;
  token: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Receives one line per request (method, path without the query, status, ms); silent when absent. */
  log?: (line: string) => void;
}

export interface RunningViewer {
  server: http.Server;
  /** Base URL, e.g. http://127.0.0.1:8300 */
  url: string;
  /** The URL to open once: it carries the token, which the viewer then keeps in a cookie. */
  loginUrl: string;
  close(): Promise<void>;
}

const SCREENSHOT = /^\/screenshots\/([0-9a-f]{64})\.png$/;

function segments(pathname: string): string[] | null {
  try {
    return pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return null; // a malformed percent-escape: no route matches
  }
}

async function route(opts: ViewerOptions, url: URL): Promise<Page> {
  const parts = segments(url.pathname);
  if (parts === null)
    throw new ViewerError(400, 'Bad request', `The path ${url.pathname} is not valid percent-encoding.`);
  const { store, temporal } = opts;
  if (parts.length === 0) return campaignsPage(store, temporal, url.searchParams.get('query') ?? '');
  if (parts[0] === 'campaigns' && parts.length === 2) {
    const limit = Number(url.searchParams.get('limit') ?? '');
    const steps = url.searchParams.get('steps');
    if (steps !== null && !/^\d{1,6}$/.test(steps))
      throw new ViewerError(400, 'Bad request', `steps "${steps}" is not a train step number.`);
    return campaignPage(store, temporal, parts[1]!, {
      after: url.searchParams.get('after') ?? undefined,
      before: url.searchParams.get('before') ?? undefined,
      limit: Number.isInteger(limit) && limit > 0 ? limit : undefined,
      stepsAtOrBelow: steps === null ? undefined : Number(steps),
    });
  }
  if (parts[0] === 'campaigns' && parts.length === 3 && parts[2] === 'search')
    return searchPage(store, parts[1]!, url.searchParams);
  if (parts[0] === 'campaigns' && parts.length === 4 && parts[2] === 'tasks')
    return taskPage(store, parts[1]!, parts[3]!);
  if (parts[0] === 'campaigns' && parts.length === 4 && parts[2] === 'trajectories')
    return trajectoryPage(store, parts[1]!, parts[3]!);
  if (parts[0] === 'campaigns' && parts.length === 4 && parts[2] === 'groups')
    return groupPage(store, parts[1]!, parts[3]!);
  throw new ViewerError(404, 'No such page', `Nothing is served at ${url.pathname}.`);
}

/** An error under /campaigns/<id>/… still links back to that campaign (when the id is a valid one). */
function campaignCrumb(pathname: string): Array<[string, string]> {
  const parts = segments(pathname);
  const id = parts?.[0] === 'campaigns' && parts.length > 2 ? parts[1] : undefined;
  return id && /^[A-Za-z0-9._=-]{1,200}$/.test(id) && !/^\.+$/.test(id)
    ? [[id, `/campaigns/${encodeURIComponent(id)}`]]
    : [];
}

const CSP = (nonce: string) =>
  [
    "default-src 'none'",
    "img-src 'self' data:",
    // Inline style attributes (grid column counts) need 'unsafe-inline'; scripts need the per-response nonce.
    "style-src 'unsafe-inline'",
    `script-src 'nonce-${nonce}'`,
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');

function sendPage(res: http.ServerResponse, page: Page, extraHeaders: Record<string, string>): void {
  const nonce = randomBytes(16).toString('base64');
  const body = layout(page, nonce);
  res.writeHead(page.status ?? 200, {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': CSP(nonce),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
    ...extraHeaders,
  });
  res.end(body);
}

async function serveScreenshot(opts: ViewerOptions, sha: string, res: http.ServerResponse): Promise<void> {
  // getBytes checks the recorded sha256, so a damaged screenshot is an error, not a wrong picture.
  const png = await opts.store.getBytes(`screenshots/${sha}.png`);
  res.writeHead(200, {
    'Content-Type': 'image/png',
    'Content-Length': String(png.length),
    'X-Content-Type-Options': 'nosniff',
    // Content-addressed: the bytes behind this URL never change.
    'Cache-Control': 'private, max-age=31536000, immutable',
  });
  res.end(png);
}

async function handle(opts: ViewerOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://viewer.invalid');
  const auth = authenticate(req, url, opts.token);
  if (!auth.ok) {
    const page = errorPage(
      401,
      'Unauthorized',
      'This viewer needs its token: open the URL it printed at start-up (it carries ?token=…), or send Authorization: Bearer <token>.'
    );
    sendPage(res, { ...page, crumbs: [] }, { 'WWW-Authenticate': 'Bearer realm="dartflow viewer"' });
    return;
  }
  const cookie: Record<string, string> = auth.setCookie ? { 'Set-Cookie': auth.setCookie } : {};
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    sendPage(res, errorPage(405, 'Method not allowed', 'The viewer is read-only: GET only.'), {
      Allow: 'GET, HEAD',
      ...cookie,
    });
    return;
  }
  const shot = SCREENSHOT.exec(url.pathname);
  if (shot) {
    try {
      await serveScreenshot(opts, shot[1]!, res);
    } catch (err) {
      const e = toViewerError(err, 'screenshot');
      res.writeHead(e.status, { 'Content-Type': 'text/plain; charset=utf-8', ...cookie });
      res.end(`${e.title}: ${e.detail}\n`);
    }
    return;
  }
  let page: Page;
  try {
    page = await route(opts, url);
  } catch (err) {
    const e = toViewerError(err);
    page = errorPage(e.status, e.title, e.detail, campaignCrumb(url.pathname));
  }
  sendPage(res, page, cookie);
}

export async function startViewer(opts: ViewerOptions): Promise<RunningViewer> {
  const host = opts.host ?? '127.0.0.1';
  const server = http.createServer((req, res) => {
    const started = Date.now();
    handle(opts, req, res)
      .catch((err: unknown) => {
        // Only a failure while writing the response itself gets here: answer if nothing was sent yet.
        if (!res.headersSent) {
          res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
          res.end(`Internal error: ${err instanceof Error ? err.message : String(err)}\n`);
        } else res.destroy();
      })
      .finally(() => {
        opts.log?.(`${req.method} ${(req.url ?? '').split('?')[0]} ${res.statusCode} ${Date.now() - started}ms`);
      });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  const url = `http://${shownHost}:${port}`;
  return {
    server,
    url,
    loginUrl: `${url}/?token=${encodeURIComponent(opts.token)}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
