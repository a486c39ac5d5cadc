/**
 * The env server's reset takes an OSWorld task file as it is (no dartflow fields), over the real HTTP
 * protocol; a body that is no task file at all is a TaskConfigError naming the request field.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { TaskConfigError } from '../../envs/errors';
import { RemoteEnv } from '../../envs/remote/client';
import { EnvServer } from '../../envs/remote-server';
import { SIM_PROFILES, SimulatedEnvPool } from '../../envs/simulated';
import type { TaskSpec } from '../../tasks';

const TOKEN = 'test-token-' + Math.random().toString(36).slice(2);
const TASK_FILE = path.join(
  __dirname,
  'fixtures',
  'osworld',
  'examples',
  'multi_apps',
  '1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b.json'
);

test('reset accepts an unchanged OSWorld task file and refuses a body that is no task', async () => {
  const backing = new SimulatedEnvPool({ slots: 1, profile: SIM_PROFILES.fast!, timeScale: 0 });
  const server = new EnvServer({ pool: backing, token: TOKEN });
  const { url } = await server.listen();
  const env = new RemoteEnv('r-osworld', { baseUrl: url, token: TOKEN, retries: 0 });
  try {
    const raw = JSON.parse(fs.readFileSync(TASK_FILE, 'utf8')) as Record<string, unknown>;
    assert.ok(!('family' in raw) && !('maxSteps' in raw) && Array.isArray(raw.source));
    const r = await env.reset(raw as unknown as TaskSpec, 3);
    assert.match(r.instruction, /^Convert form\.docx/);
    await assert.rejects(
      () => env.reset({ name: 'not a task' } as unknown as TaskSpec, 4),
      (e: unknown) =>
        e instanceof TaskConfigError &&
        /request body field "task": neither a dartflow nor an OSWorld task file/.test((e as Error).message)
    );
  } finally {
    await env.close();
    await server.close();
    await backing.close();
  }
});
