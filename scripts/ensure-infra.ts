/**
 * What `npm start` and `npm test` do first: install missing servers (infra/install.sh, idempotent and
 * quick when everything is there) and bring them up (reusing running ones). Prints the endpoints.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describeEndpoints, infraUp } from '../infra/services';
import { loadInfraSettings, PROJECT_ROOT, type InfraSettings } from '../infra/settings';

export async function ensureInfra(opts: { quiet?: boolean } = {}): Promise<InfraSettings> {
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
  return settings;
}
