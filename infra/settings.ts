/**
 * Where dartflow's servers are: read from the environment (and .tools/paths.env written by
 * infra/install.sh), validated with zod. With TEMPORAL_ADDRESS or S3_ENDPOINT set, dartflow uses that
 * existing service and starts nothing local for it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

export const PROJECT_ROOT = path.resolve(__dirname, '..');

/**
 * Dev-only credentials of the embedded local MinIO (bound to 127.0.0.1, data under .data/minio), used
 * when none are given; documented in README ("Configuration"). Never used for an S3_ENDPOINT: an external
 * endpoint without S3_ACCESS_KEY/S3_SECRET_KEY (or *_FILE) is a configuration error.
 */
export const DEV_MINIO_USER = 'dartflow';
export const DEV_MINIO_PASSWORD = 'dartflow-dev-secret';

const port = z.coerce.number().int().min(1).max(65535);
const optionalPath = z
  .string()
  .optional()
  .transform((v) => (v && v.length > 0 ? v : undefined));

export const InfraSettingsSchema = z.object({
  dataDir: z.string().describe('Folder for local server state (SQLite history, MinIO data, PID files, logs).'),
  temporal: z.object({
    external: z.boolean().describe('True when TEMPORAL_ADDRESS points at an existing cluster: nothing is started.'),
    address: z.string().min(3).describe('host:port of the Temporal frontend.'),
    namespace: z.string().min(1),
    port: port.describe('Local dev server gRPC port.'),
    uiPort: port.describe('Local dev server Web UI port.'),
    uiUrl: z.string().optional(),
    cliPath: optionalPath.describe('Temporal CLI binary used to run the local dev server.'),
    tls: z
      .object({
        certPath: z.string(),
        keyPath: z.string(),
        caPath: optionalPath,
        serverName: optionalPath,
      })
      .optional(),
  }),
  s3: z.object({
    external: z.boolean().describe('True when S3_ENDPOINT points at existing S3/MinIO: nothing is started.'),
    endpoint: z.url().describe('http(s)://host:port of the S3 API.'),
    accessKey: z.string().min(3),
    secretKey: z.string().min(8),
    bucket: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name: 3-63 lowercase letters, digits, dots, hyphens'),
    region: z.string(),
    port: port,
    consolePort: port,
    consoleUrl: z.string().optional(),
    minioBin: optionalPath,
  }),
  chromiumPath: optionalPath,
});
export type InfraSettings = z.infer<typeof InfraSettingsSchema>;

/** Parses KEY=VALUE lines of .tools/paths.env (written by infra/install.sh). */
export function readPathsEnv(root = PROJECT_ROOT): Record<string, string> {
  const file = path.join(root, '.tools', 'paths.env');
  if (!fs.existsSync(file)) return {};
  const out: Record<string, string> = {};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m && m[1] && m[2] !== undefined && m[2] !== '') out[m[1]] = m[2];
  }
  return out;
}

function readFileVar(env: NodeJS.ProcessEnv, name: string): string | undefined {
  // Secrets may come as FOO or FOO_FILE (a path), so they never have to be in a command line or in code.
  const fileVar = env[`${name}_FILE`];
  if (fileVar) return fs.readFileSync(fileVar, 'utf8').trim();
  return env[name];
}

export function loadInfraSettings(env: NodeJS.ProcessEnv = process.env): InfraSettings {
  const paths = readPathsEnv();
  const dataDir = path.resolve(env.DARTFLOW_DATA_DIR ?? path.join(PROJECT_ROOT, '.data'));
  const temporalPort = env.DARTFLOW_TEMPORAL_PORT ?? '7233';
  const uiPort = env.DARTFLOW_TEMPORAL_UI_PORT ?? String(Number(temporalPort) + 1000);
  const temporalExternal = Boolean(env.TEMPORAL_ADDRESS);
  const minioPort = env.DARTFLOW_MINIO_PORT ?? '9000';
  const consolePort = env.DARTFLOW_MINIO_CONSOLE_PORT ?? String(Number(minioPort) + 1);
  const s3External = Boolean(env.S3_ENDPOINT);
  const accessKey = readFileVar(env, 'S3_ACCESS_KEY') ?? readFileVar(env, 'MINIO_ROOT_USER');
  const secretKey = readFileVar(env, 'S3_SECRET_KEY') ?? readFileVar(env, 'MINIO_ROOT_PASSWORD');
  if (s3External && (!accessKey || !secretKey)) {
    throw new Error(
      `S3_ENDPOINT=${env.S3_ENDPOINT} is set but ${!accessKey ? 'S3_ACCESS_KEY' : 'S3_SECRET_KEY'} is not: ` +
        'set S3_ACCESS_KEY and S3_SECRET_KEY, or S3_ACCESS_KEY_FILE and S3_SECRET_KEY_FILE (paths to files ' +
        "holding them). dartflow's development credentials are only for the local MinIO it starts itself."
    );
  }
  const tlsCert = env.TEMPORAL_TLS_CERT_PATH;
  const tlsKey = env.TEMPORAL_TLS_KEY_PATH;
  const raw = {
    dataDir,
    temporal: {
      external: temporalExternal,
      address: env.TEMPORAL_ADDRESS ?? `127.0.0.1:${temporalPort}`,
      namespace: env.TEMPORAL_NAMESPACE ?? 'default',
      port: temporalPort,
      uiPort,
      uiUrl: temporalExternal ? env.TEMPORAL_UI_URL : `http://127.0.0.1:${uiPort}`,
      cliPath: env.TEMPORAL_CLI_PATH ?? paths.TEMPORAL_CLI_PATH,
      tls:
        tlsCert || tlsKey
          ? {
              certPath: tlsCert,
              keyPath: tlsKey,
              caPath: env.TEMPORAL_TLS_CA_PATH,
              serverName: env.TEMPORAL_TLS_SERVER_NAME,
            }
          : undefined,
    },
    s3: {
      external: s3External,
      endpoint: env.S3_ENDPOINT ?? `http://127.0.0.1:${minioPort}`,
      accessKey: accessKey ?? DEV_MINIO_USER,
      secretKey: secretKey ?? DEV_MINIO_PASSWORD,
      bucket: env.S3_BUCKET ?? 'dartflow',
      region: env.S3_REGION ?? 'us-east-1',
      port: minioPort,
      consolePort,
      consoleUrl: s3External ? undefined : `http://127.0.0.1:${consolePort}`,
      minioBin: env.MINIO_BIN ?? paths.MINIO_BIN,
    },
    chromiumPath: env.CHROMIUM_PATH ?? paths.CHROMIUM_PATH,
  };
  const parsed = InfraSettingsSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(
      `Invalid infrastructure settings (from environment variables):\n${lines.join('\n')}\n` +
        'See README "Configuration" for TEMPORAL_*, S3_* and DARTFLOW_* variables.'
    );
  }
  return parsed.data;
}
