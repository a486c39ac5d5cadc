/**
 * `campaign.suite = s3://<bucket>/<prefix>`: prepareCampaign reads the task files from the real MinIO —
 * an OSWorld tree with its test_all.json, the same tree without the index, and bad prefixes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { createCampaignSetupActivities } from '../../activities/data/campaign-setup';
import { parseCampaignConfig } from '../../config/load';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';

const ROOT = path.join(__dirname, 'fixtures', 'osworld');
const REPEATED = '4c2f9e1a-7b3d-4e8f-9a10-2b5c6d7e8f90';

function filesUnder(dir: string, rel = ''): string[] {
  return fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
    const r = rel ? `${rel}/${e.name}` : e.name;
    return e.isDirectory() ? filesUnder(dir, r) : [r];
  });
}

/** Uploads the fixture tree under `prefix` the way a user would (`mc cp -r`): plain objects, no dartflow metadata. */
async function upload(
  store: ObjectStore,
  prefix: string,
  skip: (rel: string) => boolean = () => false
): Promise<number> {
  const rels = filesUnder(ROOT).filter((r) => !skip(r));
  for (const rel of rels) {
    const body = fs.readFileSync(path.join(ROOT, ...rel.split('/')));
    await store.client.putObject(store.bucket, `${prefix}${rel}`, body, body.length);
  }
  return rels.length;
}

function setup(store: ObjectStore) {
  return createCampaignSetupActivities({ store, ensureInitialCheckpoint: () => Promise.resolve(0) });
}
const configFor = (suite: string) => parseCampaignConfig({ campaign: { id: 'osworld-suite', suite } });

test('prepareCampaign reads an OSWorld tree from a MinIO prefix, by folder and by index', async () => {
  const { store, cleanup } = await freshBucket('suite');
  try {
    assert.equal(await upload(store, 'tasks/osworld/'), 9);
    const { prepareCampaign } = setup(store);
    const byFolder = await prepareCampaign({ config: configFor(`s3://${store.bucket}/tasks/osworld/`) });
    const byIndex = await prepareCampaign({ config: configFor(`s3://${store.bucket}/tasks/osworld/test_all.json`) });
    const ids = byFolder.tasks.map((t) => t.id).sort();
    assert.equal(ids.length, 8);
    assert.deepEqual(byIndex.tasks.map((t) => t.id).sort(), ids);
    assert.ok(ids.includes(`chrome.${REPEATED}`) && ids.includes(`thunderbird.${REPEATED}`), ids.join(', '));
    const calc = byFolder.tasks.find((t) => t.id.startsWith('libreoffice_calc.'))!;
    assert.equal(calc.family, 'libreoffice_calc');
    assert.equal(calc.maxSteps, 30);
    assert.deepEqual(calc.trainSeeds, { from: 0, to: 1 });
    assert.equal(calc.spec.evaluator && (calc.spec.evaluator as { func: string }).func, 'compare_table');
    assert.deepEqual(byFolder.heldOut, byFolder.tasks);
    assert.equal(byFolder.initialVersion, 0);

    // without the index: <domain>/<id>.json one level under the prefix
    await upload(store, 'flat/', (rel) => !rel.startsWith('examples/'));
    const flat = await prepareCampaign({ config: configFor(`s3://${store.bucket}/flat/examples`) });
    assert.deepEqual(flat.tasks.map((t) => t.id).sort(), ids);

    // dartflow's own suites still resolve by name through the same activity
    const own = await prepareCampaign({ config: configFor('quickstart') });
    assert.deepEqual(
      own.tasks.map((t) => t.id),
      ['click-target', 'click-colour']
    );
  } finally {
    await cleanup();
  }
});

test('a bad MinIO suite is a non-retryable TaskConfigError naming the object or prefix', async () => {
  const { store, cleanup } = await freshBucket('badsuite');
  try {
    const { prepareCampaign } = setup(store);
    const rejectsWith = (suite: string, pattern: RegExp) =>
      assert.rejects(
        () => prepareCampaign({ config: configFor(suite) }),
        (err: unknown) => {
          assert.ok(err instanceof ApplicationFailure, String(err));
          assert.equal(err.type, 'TaskConfigError');
          assert.equal(err.nonRetryable, true);
          assert.match(err.message, pattern);
          return true;
        }
      );
    await rejectsWith(`s3://${store.bucket}/nothing-here/`, /nothing-here: no task files under this prefix/);
    await rejectsWith('s3://no-such-bucket-dartflow-test/x/', /bucket "no-such-bucket-dartflow-test" does not exist/);
    // the index names a task whose object is missing
    await upload(store, 'partial/', (rel) => rel.includes('thunderbird'));
    await rejectsWith(
      `s3://${store.bucket}/partial/`,
      new RegExp(`partial/test_all\\.json: field "thunderbird\\.0": no task file for "${REPEATED}"`)
    );
    // an object that is not a task file
    await store.client.putObject(store.bucket, 'junk/chrome/x.json', Buffer.from('{"hello": "world"}'));
    await rejectsWith(
      `s3://${store.bucket}/junk/`,
      /junk\/chrome\/x\.json: neither a dartflow nor an OSWorld task file/
    );
  } finally {
    await cleanup();
  }
});

test('policy.bcTaskWeights naming no task of the suite is a non-retryable ConfigError naming the key and the tasks', async () => {
  const { store, cleanup } = await freshBucket('bcweights');
  try {
    const { prepareCampaign } = setup(store);
    const config = (weights: Record<string, number>) =>
      parseCampaignConfig({ campaign: { id: 'weights', suite: 'quickstart' }, policy: { bcTaskWeights: weights } });
    await assert.rejects(
      () => prepareCampaign({ config: config({ 'click-colour': 2, 'click-colur': 3 }) }),
      (err: unknown) => {
        assert.ok(err instanceof ApplicationFailure, String(err));
        assert.equal(err.type, 'ConfigError');
        assert.equal(err.nonRetryable, true);
        assert.match(err.message, /policy\.bcTaskWeights names "click-colur", not a task of suite "quickstart"/);
        assert.match(err.message, /its tasks: click-target, click-colour/);
        return true;
      }
    );
    const ok = await prepareCampaign({ config: config({ 'click-colour': 2 }) });
    assert.deepEqual(
      ok.tasks.map((t) => t.id),
      ['click-target', 'click-colour']
    );
  } finally {
    await cleanup();
  }
});
