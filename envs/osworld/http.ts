/** fetch with a deadline whose failures are typed env errors naming the server and the call. */
import { EnvTimeoutError, EnvUnavailableError } from '../errors';

export interface Call {
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  headers?: Record<string, string>;
  json?: unknown;
  timeoutMs: number;
  /** What answers: "env server http://…", "VM http://…", "sidecar http://…". */
  who: string;
  envId?: string;
}

export async function send(c: Call): Promise<Response> {
  const what = `${c.who}: ${c.method} ${new URL(c.url).pathname}`;
  try {
    return await fetch(c.url, {
      method: c.method,
      headers: { ...(c.json !== undefined ? { 'content-type': 'application/json' } : {}), ...c.headers },
      ...(c.json !== undefined ? { body: JSON.stringify(c.json) } : {}),
      signal: AbortSignal.timeout(c.timeoutMs),
    });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError')
      throw new EnvTimeoutError(`${what} did not answer within ${c.timeoutMs} ms`, c.envId);
    throw new EnvUnavailableError(`${what}: ${e.cause?.code ?? e.cause?.message ?? e.message}`, c.envId);
  }
}

/** The JSON body, or undefined when the body is not JSON (callers decide whether that is an error). */
export async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export const sleep = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());
