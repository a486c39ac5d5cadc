/**
 * What `npm start`, `npm test` and `npm run bench` do first: install missing servers (infra/install.sh,
 * idempotent and quick when everything is there) and bring them up (reusing running ones). Prints the
 * endpoints, and remembers which servers this call started, so a one-shot command can stop exactly those.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describeEndpoints, infraUp, stopService, type ServiceHandle } from '../infra/services';
import { loadInfraSettings, PROJECT_ROOT, type InfraSettings } from '../infra/settings';

/** What identifies each server's process in its command line (as infra/services.ts's infraDown checks). */
const CMDLINE_MARKERS: Record<ServiceHandle['name'], string> = { temporal: 'start-dev', minio: 'minio' };

export interface InfraSession {
  settings: InfraSettings;
  /** Servers this call started (not reused, not external). */
  startedHere: ServiceHandle['name'][];
  /** Stops the servers this call started; servers that were already running keep running. */
  stopStartedHere(): Promise<ServiceHandle['name'][]>;
}

export async function ensureInfraSession(opts: { quiet?: boolean } = {}): Promise<InfraSession> {
  const install = spawnSync('bash', [path.join(PROJECT_ROOT, 'infra', 'install.sh')], {
    stdio: opts.quiet ? ['ignore', 'pipe', 'inherit'] : 'inherit',
    env: process.env,
  });
  if (install.status !== 0) throw new Error('infra/install.sh failed (see its output above)');
  const settings = loadInfraSettings();
  const handles = await infraUp(settings);
  for (const h of handles) {
    const how = h.external ? 'external' : h.reused ? 'reused (already running)' : `started (pid ${h.pid})`;
    console.log(`[infra] ${h.name}: ${how}`);
  }
  for (const line of describeEndpoints(settings)) console.log(`[infra] ${line}`);
  const startedHere = handles.filter((h) => !h.reused && !h.external).map((h) => h.name);
  return {
    settings,
    startedHere,
    async stopStartedHere() {
      const stopped: ServiceHandle['name'][] = [];
      for (const name of startedHere) if (await stopService(settings, name, CMDLINE_MARKERS[name])) stopped.push(name);
      return stopped;
    },
  };
}

export async function ensureInfra(opts: { quiet?: boolean } = {}): Promise<InfraSettings> {
  return (await ensureInfraSession(opts)).settings;
}
