/**
 * The trainer teaches the embedded policy a tier-1 task on real Chromium pages (before any workflow):
 * episodes sampled by the policy engine on click-target, trainStep on MinIO, success rises far above
 * chance. A small budget; the full curves are the learning benchmark's job (docs/benchmarks.md).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runLocalRl } from '../../bench/lib/local-rl';
import { parseCampaignConfig } from '../../config/load';
import { BrowserEnvPool } from '../../envs';
import type { ObjectStore } from '../../storage/object-store';
import { FAMILY_INFO } from '../../tasks/families';
import { loadTask } from '../../tasks/loader';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';

let store: ObjectStore;
let cleanup: () => Promise<void>;
let pool: BrowserEnvPool;

before(async () => {
  ({ store, cleanup } = await freshBucket('learn'));
  pool = new BrowserEnvPool({ slots: 4, executablePath: testSettings().chromiumPath });
});
after(async () => {
  await pool.close();
  await cleanup();
});

test('RL on sampled click-target episodes lifts held-out greedy success far above chance', async () => {
  const result = await runLocalRl({
    store,
    pool,
    campaignId: `learn-${uniqueSuffix()}`,
    tasks: [loadTask('click-target')],
    trainer: parseCampaignConfig({ trainer: { learningRate: 3e-3, klBeta: 0, epochs: 2 } }).trainer,
    groupSize: 8,
    groupsPerStep: 16,
    maxEpisodes: 2560,
    evalEvery: 5,
    evalEpisodesPerTask: 40,
    target: { success: 0.9, consecutive: 1 },
  });
  const first = result.curve[0]!.success;
  const best = Math.max(...result.curve.map((p) => p.success));
  const chance = FAMILY_INFO['click-target'].chance;
  assert.ok(best >= 0.75, `learned: best held-out success ${best} (first ${first}, random-policy chance ${chance})`);
  assert.ok(best >= first + 0.3 && best >= chance + 0.3, `far above the start (${first}) and chance (${chance})`);
});
