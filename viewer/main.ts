/**
 * `npx tsx viewer/main.ts [--port 8300] [--host 127.0.0.1] [--token T]`: starts the viewer against the
 * Temporal and MinIO named by the environment (infra/settings.ts) and prints the URL to open, token
 * included. The token is DARTFLOW_VIEWER_TOKEN, --token, or a fresh random one per start.
 * `runViewer(argv)` is what a `dartflow viewer` CLI command calls.
 */
import { parseArgs } from 'node:util';
import { loadInfraSettings } from '../infra/settings';
import { connectClient } from '../infra/temporal-connection';
import { ObjectStore } from '../storage/object-store';
import { newToken } from './auth';
import { startViewer, type RunningViewer } from './server';
import { TemporalSource } from './temporal-reader';

export const DEFAULT_VIEWER_PORT = 8300;

export async function runViewer(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<RunningViewer> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: String(DEFAULT_VIEWER_PORT) },
      host: { type: 'string', default: '127.0.0.1' },
      token: { type: 'string' },
      quiet: { type: 'boolean', default: false },
    },
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port ${values.port}: not a port number`);
  const settings = loadInfraSettings(env);
  const store = ObjectStore.fromSettings(settings);
  const temporal = new TemporalSource(
    () => connectClient(settings),
    settings.temporal.namespace,
    settings.temporal.uiUrl
  );
  const viewer = await startViewer({
    store,
    temporal,
    token: values.token ?? env.DARTFLOW_VIEWER_TOKEN ?? newToken(),
    host: values.host,
    port,
    log: values.quiet ? undefined : (line) => console.log(`[viewer] ${line}`),
  });
  if (values.host !== '127.0.0.1' && values.host !== 'localhost' && values.host !== '::1')
    console.warn(
      `[viewer] listening on ${values.host}: anyone who can reach it and has the token can read the campaigns`
    );
  const close = viewer.close;
  return {
    ...viewer,
    close: async () => {
      await close();
      await temporal.close();
    },
  };
}

if (require.main === module) {
  runViewer(process.argv.slice(2))
    .then((viewer) => {
      console.log(`dartflow viewer: ${viewer.loginUrl}`);
      const stop = () => {
        void viewer.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    })
    .catch((err: unknown) => {
      console.error(`dartflow viewer: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    });
}
