/**
 * Serves the installed MiniWoB++ files to a page from memory, under a made-up origin. The pages load their
 * runtime by relative URL (../core/core.js, ../common/…, images), so they need an origin; this one is
 * answered by Playwright request interception inside the browser, so nothing reaches the network and
 * Chromium's network lockdown (envs/browser/host.ts) stays as it is: any other URL a page asks for still
 * goes to the dead proxy. Only files inside the package's html folder are served (no `..`, no symlinks out);
 * anything else is a 404. Files are read once per process.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page, Route } from 'playwright-core';

/** `.invalid` is reserved (RFC 2606): it can never resolve, so nothing but our handler answers it. */
export const MINIWOB_ORIGIN = 'http://miniwob.invalid';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.gif': 'image/gif',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.svg': 'image/svg+xml',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
};

const cache = new Map<string, Buffer | null>();

/** The bytes of `urlPath` under `root`, or null when it is not a file inside root. */
export function readServedFile(root: string, urlPath: string): Buffer | null {
  let rel: string;
  try {
    rel = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  const norm = path.posix.normalize(`/${rel}`);
  if (norm.split('/').includes('..')) return null;
  const realRoot = fs.realpathSync(root);
  const key = `${realRoot}\0${norm}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let bytes: Buffer | null = null;
  try {
    const file = fs.realpathSync(path.join(realRoot, ...norm.split('/')));
    if (file.startsWith(realRoot + path.sep) && fs.statSync(file).isFile()) bytes = fs.readFileSync(file);
  } catch {
    bytes = null;
  }
  cache.set(key, bytes);
  return bytes;
}

/** The URL of a task page under the served origin. */
export function miniwobPageUrl(task: string): string {
  return `${MINIWOB_ORIGIN}/miniwob/${encodeURIComponent(task)}.html`;
}

const served = new WeakSet<Page>();

/** Installs the handler on a page (once per page; routes are per page, so other pages are unaffected). */
export async function serveMiniwob(page: Page, root: string): Promise<void> {
  if (served.has(page)) return;
  await page.route(`${MINIWOB_ORIGIN}/**`, async (route: Route) => {
    const url = new URL(route.request().url());
    const body = readServedFile(root, url.pathname);
    if (!body) {
      await route.fulfill({
        status: 404,
        contentType: 'text/plain',
        body: `not in the miniwob package: ${url.pathname}`,
      });
      return;
    }
    const type = CONTENT_TYPES[path.extname(url.pathname).toLowerCase()] ?? 'application/octet-stream';
    await route.fulfill({ status: 200, contentType: type, body });
  });
  served.add(page);
}
