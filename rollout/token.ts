/**
 * The shared bearer token between policy servers and their clients. Resolution order:
 * DARTFLOW_POLICY_TOKEN, then the file named by DARTFLOW_POLICY_TOKEN_FILE, then a default file
 * (`<dataDir>/policy-token`) which the first process creates with a random token (mode 0600), so a
 * laptop deployment works without configuration and a cluster passes the token as a secret file.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const MIN_TOKEN_LENGTH = 16;

function checkToken(token: string, where: string): string {
  const t = token.trim();
  if (t.length < MIN_TOKEN_LENGTH)
    throw new Error(`policy token from ${where} is too short (at least ${MIN_TOKEN_LENGTH} characters)`);
  return t;
}

export interface TokenSource {
  env?: NodeJS.ProcessEnv;
  /** Default token file; created with a fresh random token when `create` is set and no token is configured. */
  defaultFile?: string;
  create?: boolean;
}

export function resolvePolicyToken(src: TokenSource = {}): string {
  const env = src.env ?? process.env;
  if (env.DARTFLOW_POLICY_TOKEN) return checkToken(env.DARTFLOW_POLICY_TOKEN, 'DARTFLOW_POLICY_TOKEN');
  const file = env.DARTFLOW_POLICY_TOKEN_FILE ?? src.defaultFile;
  if (!file) throw new Error('no policy token: set DARTFLOW_POLICY_TOKEN or DARTFLOW_POLICY_TOKEN_FILE');
  if (!fs.existsSync(file) && src.create && !env.DARTFLOW_POLICY_TOKEN_FILE) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      // 'wx': when several processes start at once, exactly one writes and the others read its token.
      fs.writeFileSync(file, randomBytes(24).toString('hex'), { flag: 'wx', mode: 0o600 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  if (!fs.existsSync(file)) throw new Error(`no policy token: ${file} does not exist`);
  return checkToken(fs.readFileSync(file, 'utf8'), file);
}

/**
 * Constant-time check of an Authorization header. Both sides are hashed first so the comparison
 * runs on equal-length buffers and leaks neither the token's content nor its length.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  if (!header) return false;
  const m = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!m?.[1]) return false;
  const a = createHash('sha256').update(m[1]).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}
