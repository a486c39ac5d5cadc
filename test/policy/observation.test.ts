import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PNG } from 'pngjs';
import { actionFromIndex, actionMask, indexFromAction, tokenIndex } from '../../policy/action-space';
import { downsampleRgba, encodeInstruction, encodeScreenshot, fnv1a, tokenize } from '../../policy/observation';
import { defaultPolicySpec as spec, MASK_OFF, numActions } from '../../policy/spec';

function solidPng(w: number, h: number, paint: (x: number, y: number) => [number, number, number]): Uint8Array {
  const png = new PNG({ width: w, height: h });
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const [r, g, b] = paint(x, y);
      png.data.set([r, g, b, 255], (y * w + x) * 4);
    }
  }
  return PNG.sync.write(png);
}

test('160×160 PNG → 64×64×3 CHW floats in [0,1], area-averaged', () => {
  // Left half red, right half blue, one green pixel at (2,0).
  const png = solidPng(160, 160, (x, y) => (x === 2 && y === 0 ? [0, 255, 0] : x < 80 ? [255, 0, 0] : [0, 0, 255]));
  const obs = encodeScreenshot(png, spec);
  const S = 64;
  assert.equal(obs.length, 3 * S * S);
  const at = (c: number, y: number, x: number): number => obs[c * S * S + y * S + x]!;
  assert.ok(Math.abs(at(0, 10, 10) - 1) < 1e-6 && at(2, 10, 10) === 0);
  assert.ok(Math.abs(at(2, 10, 40) - 1) < 1e-6 && at(0, 10, 40) === 0);
  // Output cell 0 covers input [0, 2.5)²; the green pixel (2,0) overlaps it by 0.5×1 of 6.25 px².
  assert.ok(Math.abs(at(1, 0, 0) - 0.5 / 6.25) < 1e-6);
  // Output cell 1 covers [2.5, 5): overlap 0.5 as well.
  assert.ok(Math.abs(at(1, 0, 1) - 0.5 / 6.25) < 1e-6);
  // Mass is conserved: the mean intensity per channel is unchanged.
  const mean = (c: number): number => obs.subarray(c * S * S, (c + 1) * S * S).reduce((a, b) => a + b, 0) / (S * S);
  assert.ok(Math.abs(mean(1) - 1 / (160 * 160)) < 1e-7);
  assert.ok(Math.abs(mean(0) - (0.5 - 1 / (160 * 160))) < 1e-6);
});

test('downsample of an exact multiple is a plain block mean', () => {
  const rgba = new Uint8Array(4 * 4 * 4);
  for (let i = 0; i < 16; i++) rgba.set([i * 10, 0, 0, 255], i * 4);
  const out = downsampleRgba(rgba, 4, 4, 2);
  assert.ok(Math.abs(out[0]! - (0 + 10 + 40 + 50) / 4 / 255) < 1e-6);
});

test('instruction encoding: stable FNV-1a hashing, case/punctuation-insensitive, L2-normalised', () => {
  assert.equal(fnv1a(''), 0x811c9dc5);
  assert.equal(fnv1a('a'), 0xe40c292c); // FNV-1a 32 test vector
  assert.deepEqual(tokenize('Click on the RED box!'), ['click', 'on', 'the', 'red', 'box']);
  const a = encodeInstruction('Click on the red box', spec);
  const b = encodeInstruction('click ON the red, box.', spec);
  const c = encodeInstruction('Click on the blue box', spec);
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  assert.equal(a.length, spec.vocabSize);
  assert.ok(Math.abs(Math.hypot(...a) - 1) < 1e-6);
  assert.ok(encodeInstruction('', spec).every((v) => v === 0));
});

test('action index ↔ canonical action', () => {
  const ctx = { fields: ['hello', 'world'] };
  assert.deepEqual(actionFromIndex(spec, 0, ctx), { type: 'click', x: 0.5 / 16, y: 0.5 / 16 });
  assert.deepEqual(actionFromIndex(spec, 3 * 16 + 5, ctx), { type: 'click', x: 5.5 / 16, y: 3.5 / 16 });
  assert.deepEqual(actionFromIndex(spec, 257, ctx), { type: 'type', text: 'world' });
  assert.throws(() => actionFromIndex(spec, 258, ctx), /only 2 fields/);
  assert.deepEqual(actionFromIndex(spec, tokenIndex(spec, 'key_enter'), ctx), { type: 'hotkey', keys: ['enter'] });
  assert.deepEqual(actionFromIndex(spec, tokenIndex(spec, 'scroll_down'), ctx), {
    type: 'scroll',
    direction: 'down',
    x: 0.5,
    y: 0.5,
  });
  assert.deepEqual(actionFromIndex(spec, tokenIndex(spec, 'wait'), ctx), { type: 'wait' });
  assert.deepEqual(actionFromIndex(spec, tokenIndex(spec, 'finished'), ctx), { type: 'finished' });
  assert.throws(() => actionFromIndex(spec, tokenIndex(spec, 'reserved_0'), ctx), /reserved/);
  assert.throws(() => actionFromIndex(spec, 272, ctx), /out of range/);
  // Every decodable index maps back to itself.
  for (let i = 0; i < numActions(spec); i++) {
    let action;
    try {
      action = actionFromIndex(spec, i, ctx);
    } catch {
      continue;
    }
    assert.equal(indexFromAction(spec, action, ctx), i, `index ${i}`);
  }
});

test('demonstration actions map to the nearest cell or token, or null when inexpressible', () => {
  const ctx = { fields: ['abc'] };
  assert.equal(indexFromAction(spec, { type: 'click', x: 0.99, y: 0.01 }, ctx), 15);
  assert.equal(indexFromAction(spec, { type: 'click', x: 1, y: 1 }, ctx), 255);
  assert.equal(indexFromAction(spec, { type: 'click', x: 0.5, y: 0.5 }, ctx), 8 * 16 + 8);
  assert.equal(indexFromAction(spec, { type: 'type', text: 'abc' }, ctx), 256);
  assert.equal(indexFromAction(spec, { type: 'type', text: 'free text' }, ctx), null);
  assert.equal(indexFromAction(spec, { type: 'hotkey', keys: ['Return'] }, ctx), tokenIndex(spec, 'key_enter'));
  assert.equal(indexFromAction(spec, { type: 'hotkey', keys: ['ctrl', 'c'] }, ctx), null);
  assert.equal(indexFromAction(spec, { type: 'scroll', direction: 'left' }, ctx), null);
  assert.equal(indexFromAction(spec, { type: 'drag', x: 0, y: 0, x2: 1, y2: 1 }, ctx), null);
  assert.equal(indexFromAction(spec, { type: 'finished', content: 'done' }, ctx), tokenIndex(spec, 'finished'));
});

test('action mask: type fields per task, reserved slots always off, optional token allow-list', () => {
  const m = actionMask(spec, { numFields: 2 });
  assert.equal(m.length, 272);
  assert.ok(m.subarray(0, 256).every((v) => v === 0));
  assert.deepEqual(Array.from(m.subarray(256, 260)), [0, 0, MASK_OFF, MASK_OFF].map(Math.fround));
  assert.ok(m.subarray(268, 272).every((v) => v === Math.fround(MASK_OFF)));
  const clickOnly = actionMask(spec, { numFields: 0, allowedTokens: [] });
  assert.ok(clickOnly.subarray(256).every((v) => v < 0));
  assert.ok(
    actionMask(spec, { numFields: 0, noClicks: true })
      .subarray(0, 256)
      .every((v) => v < 0)
  );
});
