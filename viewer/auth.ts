/**
 * Token auth for the viewer: `Authorization: Bearer <token>`, or `?token=<token>` once (the link the
 * viewer prints), which sets an HttpOnly cookie so that later page views, screenshots and links work
 * without the token in every URL. Comparison is constant-time over sha256 digests (equal length always).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const COOKIE_NAME = 'dartflow_viewer';

export const newToken = (): string => randomBytes(24).toString('base64url');

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  return timingSafeEqual(digest(given), digest(expected));
}

function cookieValue(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export interface AuthResult {
  ok: boolean;
  /** Set when the token came in the query string: remember it in a cookie. */
  setCookie?: string;
}

export function authenticate(req: IncomingMessage, url: URL, expected: string): AuthResult {
  const header = req.headers.authorization;
  if (header?.startsWith('Bearer ')) return { ok: tokenMatches(header.slice(7).trim(), expected) };
  const fromQuery = url.searchParams.get('token');
  if (fromQuery !== null) {
    if (!tokenMatches(fromQuery, expected)) return { ok: false };
    return {
      ok: true,
      setCookie: `${COOKIE_NAME}=${encodeURIComponent(fromQuery)}; HttpOnly; SameSite=Strict; Path=/`,
    };
  }
  return { ok: tokenMatches(cookieValue(req, COOKIE_NAME), expected) };
}
