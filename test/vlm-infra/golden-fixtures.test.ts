/**
 * The golden fixtures the Python algorithm core is held to (test/fixtures/golden/algorithms.json,
 * python/tests/test_algorithms_parity.py) are what the TypeScript functions give now: a change to
 * either side's numbers shows up as a failing test instead of a silent divergence.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { it } from 'node:test';
import { GOLDEN_FIXTURE_PATH, goldenFixtures } from '../../scripts/gen-golden-fixtures';

it('test/fixtures/golden/algorithms.json is what algorithms/*.ts compute now', () => {
  const committed: unknown = JSON.parse(fs.readFileSync(GOLDEN_FIXTURE_PATH, 'utf8'));
  // Through JSON, as the file was written: typed arrays become arrays, −0 becomes 0.
  const fresh: unknown = JSON.parse(JSON.stringify(goldenFixtures()));
  assert.deepEqual(committed, fresh, 'stale: run `npx tsx scripts/gen-golden-fixtures.ts`');
});
