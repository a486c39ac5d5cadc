/**
 * The data manager's experience pool on a real MinIO: DART's per-task pool (the newest k successes of a
 * task) and the pool keyed by instruction (curation.poolKey 'instruction': the newest k per instruction,
 * a task cap, and a lookup that prefers the failed group's own instruction).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createCampaignDataActivities } from '../../activities/data/campaign-data';
import { instructionKeyOf } from '../../activities/env/instruction-key';
import { toTrajectorySummary } from '../../workflows/logic/trajectory-summary';
import type { TrajectorySummary } from '../../schemas/campaign';
import { TrajectoryManifestSchema, type TrajectoryManifest } from '../../schemas/records';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { freshBucket } from '../helpers/infra';

let store: ObjectStore;
let cleanup: () => Promise<void>;
before(async () => {
  ({ store, cleanup } = await freshBucket('experience-pool'));
});
after(async () => {
  await cleanup();
});

const ORANGE = instructionKeyOf('Click the orange button');
const RED = instructionKeyOf('Click the red button');

/** A pool with a controllable clock: each add happens one tick after the previous one. */
function poolAt(campaignId: string) {
  let clock = 1_000;
  const data = createCampaignDataActivities({ store, now: () => clock });
  return { data, tick: () => (clock += 1), campaignId };
}

function success(id: string, instructionKey?: string, reward = 1): TrajectorySummary {
  return {
    trajectoryId: id,
    manifestKey: `m/${id}`,
    taskId: 'click-colour',
    groupId: `g-${id}`,
    reward,
    status: 'ok',
    numSteps: 1,
    minPolicyVersion: 3,
    maxPolicyVersion: 3,
    injectedFromPool: false,
    ...(instructionKey ? { instructionKey } : {}),
  };
}

async function pooledIds(campaignId: string): Promise<string[]> {
  const names = await store.list(keys.poolPrefix(campaignId, 'click-colour'));
  return names
    .map((k) =>
      k
        .split('/')
        .at(-1)!
        .replace(/^[0-9a-f]{16}=/, '')
        .replace(/\.json$/, '')
    )
    .sort();
}

test('instruction keys are 16 hex digits of the exact text, and episode results carry them into summaries', () => {
  assert.match(ORANGE, /^[0-9a-f]{16}$/);
  assert.notEqual(ORANGE, RED);
  assert.notEqual(instructionKeyOf('click the orange button'), ORANGE, 'the text is not normalised');
  const base = {
    trajectoryId: 't',
    taskId: 'click-colour',
    seed: 1,
    manifestKey: 'm/t',
    reward: 1,
    status: 'ok' as const,
    numSteps: 1,
    minPolicyVersion: 0,
    maxPolicyVersion: 0,
    envKind: 'browser',
  };
  assert.equal(toTrajectorySummary({ ...base, instructionKey: ORANGE }, 'g').instructionKey, ORANGE);
  assert.equal('instructionKey' in toTrajectorySummary(base, 'g'), false, 'absent stays absent (older workers)');
});

test("per task (DART): the newest k of the task are kept whatever their instruction; lookup takes the task's newest", async () => {
  const { data, tick, campaignId } = poolAt('pool-task');
  for (const [id, ik] of [
    ['a', ORANGE],
    ['b', RED],
    ['c', RED],
  ] as const) {
    tick();
    await data.addToPool({ campaignId, trajectories: [success(id, ik)], keepNewest: 2 });
  }
  assert.deepEqual(await pooledIds(campaignId), ['b', 'c'], 'the orange success was evicted by newer red ones');
  const found = await data.findPoolSuccess({ campaignId, taskId: 'click-colour' });
  assert.equal(found?.trajectoryId, 'c');
  assert.equal(found?.instructionKey, RED, 'the summary keeps its instruction key');
});

test('per instruction: the newest k per instruction, a failed group gets its own instruction first, else the task newest', async () => {
  const { data, tick, campaignId } = poolAt('pool-instruction');
  const add = async (id: string, ik: string | undefined, reward = 1) => {
    tick();
    return data.addToPool({
      campaignId,
      trajectories: [success(id, ik, reward)],
      keepNewest: 2,
      perInstruction: { maxPerTask: 5 },
    });
  };
  await add('o1', ORANGE);
  for (const id of ['r1', 'r2', 'r3']) await add(id, RED);
  assert.equal(await add('r-fail', RED, 0), 0, 'a failure is not pooled');
  assert.deepEqual(await pooledIds(campaignId), ['o1', 'r2', 'r3'], 'red keeps its newest 2; orange keeps its one');

  const orange = await data.findPoolSuccess({ campaignId, taskId: 'click-colour', instructionKey: ORANGE });
  assert.equal(orange?.trajectoryId, 'o1', "orange's own success, though red's are newer");
  const red = await data.findPoolSuccess({ campaignId, taskId: 'click-colour', instructionKey: RED });
  assert.equal(red?.trajectoryId, 'r3');
  const yellow = instructionKeyOf('Click the yellow button');
  const fallback = await data.findPoolSuccess({ campaignId, taskId: 'click-colour', instructionKey: yellow });
  assert.equal(fallback?.trajectoryId, 'r3', 'no yellow success yet: the task newest (DART)');

  // Entries without an instruction (older workers) form their own key. Over the task cap, the oldest entry of
  // the instruction with the most entries goes (red and yellow have 2; red's oldest is older): orange's only
  // success, the oldest entry of all, stays.
  await add('legacy', undefined);
  await add('y1', yellow);
  assert.deepEqual(await pooledIds(campaignId), ['legacy', 'o1', 'r2', 'r3', 'y1']);
  await add('y2', yellow);
  assert.deepEqual(await pooledIds(campaignId), ['legacy', 'o1', 'r3', 'y1', 'y2'], 'cap 5: red loses r2');
  const orangeAgain = await data.findPoolSuccess({ campaignId, taskId: 'click-colour', instructionKey: ORANGE });
  assert.equal(orangeAgain?.trajectoryId, 'o1', "a rare instruction's only success outlives the cap");

  // Idempotent: a retried add of the same trajectory rewrites one object.
  await add('y2', yellow);
  assert.deepEqual(await pooledIds(campaignId), ['legacy', 'o1', 'r3', 'y1', 'y2']);
  assert.deepEqual(await data.poolSizes({ campaignId }), { 'click-colour': 5 });
});

test('a process reads back no pool entry it wrote; another process reads them and sees the same pool', async () => {
  const campaignId = 'pool-cache';
  let clock = 5_000;
  const gets: string[] = [];
  const counting = Object.create(store) as ObjectStore;
  counting.getJson = ((...a: Parameters<ObjectStore['getJson']>) => {
    gets.push(a[0]);
    return store.getJson(...a);
  }) as ObjectStore['getJson'];
  const data = createCampaignDataActivities({ store: counting, now: () => clock });
  for (const id of ['p1', 'p2', 'p3', 'p4']) {
    clock++;
    await data.addToPool({ campaignId, trajectories: [success(id, RED)], keepNewest: 2 });
  }
  assert.deepEqual(await pooledIds(campaignId), ['p3', 'p4']);
  assert.equal((await data.findPoolSuccess({ campaignId, taskId: 'click-colour' }))?.trajectoryId, 'p4');
  assert.deepEqual(gets, [], 'eviction and lookup used the entries this process wrote (they were a GET each)');

  // Another orchestrator (a fresh process) reads what it has not seen, and evicts by the stored pooledAt.
  const other = createCampaignDataActivities({ store: counting, now: () => ++clock });
  assert.equal((await other.findPoolSuccess({ campaignId, taskId: 'click-colour' }))?.trajectoryId, 'p4');
  assert.equal(gets.length, 2, 'the other process read both entries once');
  await other.addToPool({ campaignId, trajectories: [success('p5', RED)], keepNewest: 2 });
  assert.deepEqual(await pooledIds(campaignId), ['p4', 'p5'], 'its eviction took the oldest (p3), as the first would');
  // The first process lists again and does not offer the entry the other one evicted.
  assert.equal((await data.findPoolSuccess({ campaignId, taskId: 'click-colour' }))?.trajectoryId, 'p5');

  // MinIO down while reading an entry is an error (the activity retries), not an entry skipped or evicted.
  const failing = Object.create(store) as ObjectStore;
  failing.getJson = (() => Promise.reject(new Error('connect ECONNREFUSED'))) as ObjectStore['getJson'];
  const third = createCampaignDataActivities({ store: failing, now: () => ++clock });
  await assert.rejects(third.findPoolSuccess({ campaignId, taskId: 'click-colour' }), /ECONNREFUSED/);
  assert.deepEqual(await pooledIds(campaignId), ['p4', 'p5']);
});

test("an operator's injected success is keyed by its manifest's instruction", async () => {
  const campaignId = 'pool-inject';
  const data = createCampaignDataActivities({ store, now: () => 5 });
  const manifest: TrajectoryManifest = TrajectoryManifestSchema.parse({
    schemaVersion: 1,
    trajectoryId: 'demo-1',
    campaignId,
    taskId: 'click-colour',
    groupId: 'demo',
    seed: 7,
    instruction: 'Click the orange button',
    fields: [],
    reward: 1,
    status: 'ok',
    numSteps: 1,
    maxSteps: 4,
    minPolicyVersion: 0,
    maxPolicyVersion: 0,
    stepsKey: 'campaigns/pool-inject/trajectories/demo-1/steps.jsonl',
    stepsSha256: '0'.repeat(64),
    source: 'demo',
    envKind: 'browser',
    createdAt: 5,
  });
  const manifestKey = keys.trajectoryManifest(campaignId, 'demo-1');
  await store.putJson(manifestKey, manifest, TrajectoryManifestSchema);
  // A newer red success first: the lookup by orange must still find the (older) orange demo.
  await createCampaignDataActivities({ store, now: () => 4 }).addToPool({
    campaignId,
    trajectories: [success('red-1', RED)],
    keepNewest: 2,
    perInstruction: { maxPerTask: 64 },
  });
  await data.injectSuccess({ campaignId, taskId: 'click-colour', manifestKey });
  assert.deepEqual(
    (await store.list(keys.poolPrefix(campaignId, 'click-colour'))).map((k) => k.split('/').at(-1)).sort(),
    [`${ORANGE}=demo-1.json`, `${RED}=red-1.json`]
  );
  await createCampaignDataActivities({ store, now: () => 6 }).addToPool({
    campaignId,
    trajectories: [success('red-2', RED)],
    keepNewest: 2,
    perInstruction: { maxPerTask: 64 },
  });
  const found = await data.findPoolSuccess({ campaignId, taskId: 'click-colour', instructionKey: ORANGE });
  assert.equal(found?.trajectoryId, 'demo-1');
  assert.equal(found?.instructionKey, ORANGE);
});
