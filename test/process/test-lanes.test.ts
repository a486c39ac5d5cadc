/** scripts/lib/test-lanes.ts: how `npm test` splits its files into the main and the VLM lane. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { laneCount, testLanes } from '../../scripts/lib/test-lanes';

const files = [
  'test/algorithms/adam.test.ts',
  'test/campaign/campaign.test.ts',
  'test/static.test.ts',
  'test/vlm-infra/python.test.ts',
  'test/vlm/vlm-campaign.test.ts',
];

test('two lanes: the VLM files (test/vlm, test/vlm-infra) in one, everything else in the other', () => {
  assert.deepEqual(testLanes(files, 2), [
    { name: 'main', files: ['test/algorithms/adam.test.ts', 'test/campaign/campaign.test.ts', 'test/static.test.ts'] },
    { name: 'vlm', files: ['test/vlm-infra/python.test.ts', 'test/vlm/vlm-campaign.test.ts'] },
  ]);
  // A filter that leaves one kind only gives one lane.
  assert.deepEqual(testLanes(['test/vlm/uitars.test.ts'], 2), [{ name: 'vlm', files: ['test/vlm/uitars.test.ts'] }]);
  assert.deepEqual(testLanes([], 2), []);
});

test('one lane: every file, in order', () => {
  assert.deepEqual(testLanes(files, 1), [{ name: 'main', files }]);
});

test('DARTFLOW_TEST_LANES: 2 by default, 1 or 2 when set, anything else refused naming the variable', () => {
  assert.equal(laneCount({}), 2);
  assert.equal(laneCount({ DARTFLOW_TEST_LANES: '1' }), 1);
  assert.equal(laneCount({ DARTFLOW_TEST_LANES: ' 2 ' }), 2);
  assert.throws(() => laneCount({ DARTFLOW_TEST_LANES: '3' }), /DARTFLOW_TEST_LANES=3: use 1/);
});
