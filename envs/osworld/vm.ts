/**
 * The leased VM's own control server (OSWorld's Flask server on container port 5000): GET /screenshot
 * and POST /execute with pyautogui code, with OSWorld's controller tries (desktop_env/controllers/python.py).
 */
import { EnvCrashedError, EnvTimeoutError, EnvUnavailableError } from '../errors';
import type { Observation } from '../types';
import type { OsworldEnvSettings } from './config';
import type { VmLease } from './env-server';
import { ScreenshotNotImageError } from './errors';
import { jsonOf, send, sleep } from './http';

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** The prefix OSWorld's PythonController puts before every pyautogui command. */
export const PYAUTOGUI_PREFIX = 'import pyautogui; import time; pyautogui.FAILSAFE = False; ';

export const vmUrl = (l: VmLease) => `http://${l.host}:${l.serverPort}`;

/** Width and height from a PNG's IHDR chunk; anything else is not a screenshot. */
export function pngSize(bytes: Uint8Array, who: string, envId: string): { width: number; height: number } {
  const isPng = bytes.length >= 24 && PNG_MAGIC.every((b, i) => bytes[i] === b);
  if (!isPng) {
    const head = Buffer.from(bytes.subarray(0, 16)).toString('hex');
    throw new ScreenshotNotImageError(
      `${who}: GET /screenshot returned ${bytes.length} bytes that are not a PNG image (starts ${head || '(empty)'})`,
      envId
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { width: view.getUint32(16), height: view.getUint32(20) };
}

/**
 * Runs `fn` up to `tries` times. Only failures that may pass are retried (no answer / refused / 5xx); a
 * VM still unreachable after all tries is reported as crashed (it died) or timed out (it hangs).
 */
async function withTries<T>(s: OsworldEnvSettings, fn: () => Promise<T>, retryTimeouts: boolean): Promise<T> {
  let last: unknown;
  for (let i = 0; i < s.vmTries; i++) {
    if (i > 0) await sleep(s.vmRetryDelayMs);
    try {
      return await fn();
    } catch (err) {
      last = err;
      const passing = err instanceof EnvUnavailableError || (retryTimeouts && err instanceof EnvTimeoutError);
      if (!passing) throw err;
    }
  }
  throw last;
}

export async function screenshot(s: OsworldEnvSettings, lease: VmLease, envId: string): Promise<Observation> {
  const who = `VM ${vmUrl(lease)} (emulator ${lease.emulatorId})`;
  try {
    return await withTries(
      s,
      async () => {
        const res = await send({
          method: 'GET',
          url: `${vmUrl(lease)}/screenshot`,
          timeoutMs: s.timeouts.screenshotMs,
          who,
          envId,
        });
        if (!res.ok) throw new EnvUnavailableError(`${who}: GET /screenshot: HTTP ${res.status}`, envId);
        const png = new Uint8Array(await res.arrayBuffer());
        return { png, ...pngSize(png, who, envId) };
      },
      true
    );
  } catch (err) {
    throw gone(err, who, envId);
  }
}

export interface ExecResult {
  ok: boolean;
  error?: string;
}

/**
 * POST /execute `{command: ["python", "-c", prefix + code], shell: false}`. A refused connection is
 * retried (the command never arrived); a timeout is not, because the command may have run (a second run
 * would act twice). A non-zero exit is a failed action, not a broken VM.
 */
export async function execute(s: OsworldEnvSettings, lease: VmLease, code: string, envId: string): Promise<ExecResult> {
  const who = `VM ${vmUrl(lease)} (emulator ${lease.emulatorId})`;
  try {
    return await withTries(
      s,
      async () => {
        const res = await send({
          method: 'POST',
          url: `${vmUrl(lease)}/execute`,
          json: { command: ['python', '-c', PYAUTOGUI_PREFIX + code], shell: false },
          timeoutMs: s.timeouts.executeMs,
          who,
          envId,
        });
        if (res.status >= 500) throw new EnvUnavailableError(`${who}: POST /execute: HTTP ${res.status}`, envId);
        const body = (await jsonOf(res)) as { returncode?: unknown; error?: unknown; status?: unknown } | undefined;
        if (!res.ok) return { ok: false, error: `POST /execute: HTTP ${res.status}` };
        const rc = typeof body?.returncode === 'number' ? body.returncode : body?.status === 'success' ? 0 : 1;
        return rc === 0 ? { ok: true } : { ok: false, error: String(body?.error ?? `exit ${rc}`).slice(0, 2000) };
      },
      false
    );
  } catch (err) {
    throw gone(err, who, envId);
  }
}

/** After the tries: a VM that still refuses connections is gone (crashed); timeouts stay timeouts. */
function gone(err: unknown, who: string, envId: string): unknown {
  if (err instanceof EnvUnavailableError && err.constructor === EnvUnavailableError)
    return new EnvCrashedError(`${who} is gone: ${err.message}`, envId);
  return err;
}
