/** Connections to Temporal from settings (local dev server or an existing cluster with mTLS). */
import fs from 'node:fs';
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import { payloadGuardClientInterceptor } from './payload-guard';
import type { InfraSettings } from './settings';

function tlsOptions(settings: InfraSettings): ConnectionOptions['tls'] {
  const tls = settings.temporal.tls;
  if (!tls) return undefined;
  return {
    serverNameOverride: tls.serverName,
    serverRootCACertificate: tls.caPath ? fs.readFileSync(tls.caPath) : undefined,
    clientCertPair: { crt: fs.readFileSync(tls.certPath), key: fs.readFileSync(tls.keyPath) },
  };
}

export async function connectClient(settings: InfraSettings, connectTimeoutMs = 10_000): Promise<Client> {
  const connection = await Connection.connect({
    address: settings.temporal.address,
    tls: tlsOptions(settings),
    connectTimeout: connectTimeoutMs,
  });
  // Every dartflow client refuses oversized payloads before sending them (infra/payload-guard.ts).
  return new Client({
    connection,
    namespace: settings.temporal.namespace,
    interceptors: { workflow: [payloadGuardClientInterceptor] },
  });
}

/**
 * Retries a role's start-up step (connecting to Temporal, reaching MinIO) while the server is down or
 * restarting, instead of exiting: a worker restarted during an outage comes up when the server does.
 * Gives up after `timeoutMs` (DARTFLOW_STARTUP_RETRY_MS, default 5 minutes) with the last error.
 */
export async function retryStartup<T>(
  what: string,
  fn: () => Promise<T>,
  timeoutMs = Number(process.env.DARTFLOW_STARTUP_RETRY_MS ?? 300_000)
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() + 1000 > deadline) throw err;
      const delay = Math.min(5000, 250 * 2 ** attempt);
      console.warn(`[startup] ${what} failed (${String(err).split('\n')[0]}); retrying in ${delay} ms`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

export async function connectWorker(settings: InfraSettings): Promise<NativeConnection> {
  const tls = tlsOptions(settings) as NativeConnectionOptions['tls'];
  return retryStartup(`connecting to Temporal at ${settings.temporal.address}`, () =>
    NativeConnection.connect({ address: settings.temporal.address, tls })
  );
}
