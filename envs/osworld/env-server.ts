/**
 * Client of GUI-Docker-Env's control server (dart-spec.md §2.1 b): leases a VM with the token's quota
 * checked first (GET /tokens, then POST /start_emulator; 429 = quota used up), trying each env server
 * in turn like DART's docker_server provider, and releases it with DELETE /emulators/{id}.
 */
import { z } from 'zod';
import { EnvError, EnvProtocolError, EnvUnavailableError } from '../errors';
import type { OsworldEnvSettings } from './config';
import { EnvServerQuotaError } from './errors';
import { jsonOf, send } from './http';

/** A leased VM: where its in-VM control server (container port 5000) and other ports are mapped. */
export interface VmLease {
  envServer: string;
  emulatorId: string;
  host: string;
  serverPort: number;
  chromiumPort: number;
  vlcPort: number;
  vncPort: number;
}

const port = z.number().int().min(1).max(65535);
const StartResponseSchema = z.object({
  code: z.literal(0),
  data: z.object({
    emulator_id: z.string().min(1),
    server_port: port,
    chromium_port: port,
    vlc_port: port,
    vnc_port: port,
  }),
});
/** GET /tokens: `{token: {current, limit, emulator_count}}`; a token appears after its first lease. */
const TokensSchema = z.record(z.string(), z.object({ current: z.number(), limit: z.number() }).loose());

const auth = (s: OsworldEnvSettings) => ({ authorization: `Bearer ${s.token}` });

/** Why one server did not lease; the error thrown when none did lists them all. */
type Refusal = { server: string; quota: boolean; reason: string };

async function tryServer(s: OsworldEnvSettings, server: string, envId: string): Promise<VmLease | Refusal> {
  const who = `env server ${server}`;
  try {
    // The quota check first, as DART's client does: a full server is skipped without asking it to start.
    const tokensRes = await send({
      method: 'GET',
      url: new URL('/tokens', server).href,
      headers: auth(s),
      timeoutMs: s.timeouts.quotaMs,
      who,
      envId,
    });
    if (tokensRes.ok) {
      const tokens = TokensSchema.safeParse(await jsonOf(tokensRes));
      const mine = tokens.success ? tokens.data[s.token] : undefined;
      if (mine && mine.current >= mine.limit)
        return { server, quota: true, reason: `token quota used up (${mine.current}/${mine.limit}) per GET /tokens` };
    }
    const res = await send({
      method: 'POST',
      url: new URL('/start_emulator', server).href,
      headers: auth(s),
      json: { token: s.token },
      timeoutMs: s.timeouts.startMs,
      who,
      envId,
    });
    const body = await jsonOf(res);
    const message = (body as { message?: unknown } | undefined)?.message;
    if (res.status === 429) return { server, quota: true, reason: `HTTP 429 ${String(message ?? 'quota exceeded')}` };
    if (!res.ok) return { server, quota: false, reason: `HTTP ${res.status} ${String(message ?? '')}`.trim() };
    const parsed = StartResponseSchema.safeParse(body);
    if (!parsed.success) {
      throw new EnvProtocolError(
        `${who}: POST /start_emulator answered ${JSON.stringify(body)?.slice(0, 200)}: field ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`,
        envId
      );
    }
    const d = parsed.data.data;
    return {
      envServer: server,
      emulatorId: d.emulator_id,
      host: s.vmHost ?? new URL(server).hostname,
      serverPort: d.server_port,
      chromiumPort: d.chromium_port,
      vlcPort: d.vlc_port,
      vncPort: d.vnc_port,
    };
  } catch (err) {
    if (err instanceof EnvProtocolError) throw err;
    if (err instanceof EnvError) return { server, quota: false, reason: err.message };
    throw err;
  }
}

/** Leases one VM from the first env server that gives one. */
export async function leaseVm(s: OsworldEnvSettings, envId: string): Promise<VmLease> {
  const refusals: Refusal[] = [];
  for (const server of s.envServerUrls) {
    const r = await tryServer(s, server, envId);
    if ('emulatorId' in r) return r;
    refusals.push(r);
  }
  const list = refusals.map((r) => `${r.server}: ${r.reason}`).join('; ');
  if (refusals.every((r) => r.quota))
    throw new EnvServerQuotaError(`${envId}: no env server has quota left (${list})`, envId);
  throw new EnvUnavailableError(`${envId}: no env server leased a VM (${list})`, envId);
}

/** DELETE /emulators/{id}; a 404 means it is already gone (released, or the server restarted). */
export async function releaseVm(s: OsworldEnvSettings, lease: VmLease, envId: string): Promise<void> {
  const res = await send({
    method: 'DELETE',
    url: new URL(`/emulators/${encodeURIComponent(lease.emulatorId)}`, lease.envServer).href,
    headers: auth(s),
    timeoutMs: s.timeouts.releaseMs,
    who: `env server ${lease.envServer}`,
    envId,
  });
  if (!res.ok && res.status !== 404)
    throw new EnvUnavailableError(
      `env server ${lease.envServer}: DELETE /emulators/${lease.emulatorId}: HTTP ${res.status}`,
      envId
    );
}
