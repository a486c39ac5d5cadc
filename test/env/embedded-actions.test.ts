import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  EMBEDDED_ACTION_COUNT,
  EMBEDDED_TOKENS,
  GRID,
  embeddedActionToIndex,
  embeddedIndexToAction,
  embeddedValidMask,
} from '../../actions/embedded';
import { TOKEN_NAMES, defaultPolicySpec, numActions } from '../../policy/spec';

test('the embedded action layout matches the policy spec (random/oracle policies and the ONNX policy agree)', () => {
  assert.equal(GRID, defaultPolicySpec.gridSize);
  assert.equal(EMBEDDED_ACTION_COUNT, numActions(defaultPolicySpec));
  assert.deepEqual([...EMBEDDED_TOKENS], [...TOKEN_NAMES]);
});

test('every valid embedded index round-trips through its canonical action', () => {
  const fields = ['kiwi', 'red'];
  const mask = embeddedValidMask(fields);
  assert.equal(mask.filter(Boolean).length, 256 + 2 + 4 + 2 + 1 + 1);
  for (let i = 0; i < EMBEDDED_ACTION_COUNT; i++) {
    const a = embeddedIndexToAction(i, fields);
    if (!mask[i]) {
      assert.equal(a, null);
      continue;
    }
    assert.ok(a);
    assert.equal(embeddedActionToIndex(a, fields), i, `index ${i}`);
  }
  assert.equal(embeddedActionToIndex({ type: 'hotkey', keys: ['ctrl', 'a'] }, fields), undefined);
  assert.equal(embeddedActionToIndex({ type: 'click', x: 1, y: 1 }, fields), 255);
});
