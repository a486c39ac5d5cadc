/** Connections to Temporal from settings (local dev server or an existing cluster with mTLS). */
import fs from 'node:fs';
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
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
  return new Client({ connection, namespace: settings.temporal.namespace });
}

export async function connectWorker(settings: InfraSettings): Promise<NativeConnection> {
  const tls = tlsOptions(settings) as NativeConnectionOptions['tls'];
  return NativeConnection.connect({ address: settings.temporal.address, tls });
}
