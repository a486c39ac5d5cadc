/**
 * Two helpers of the VLM path: running a multi-action response within one step (actions/sequence.ts)
 * and smart-resizing screenshots before they are sent (vlm/screenshot.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PNG } from 'pngjs';
import { runActionSequence, type ActionOutcome } from '../../actions';
import type { CanonicalAction } from '../../schemas/actions';
import { smartResizePng } from '../../vlm';

/** A step function that records what ran and answers from a table keyed by action type. */
function recorder(answers: Partial<Record<CanonicalAction['type'], ActionOutcome>> = {}) {
  const ran: string[] = [];
  const step = (a: CanonicalAction): Promise<ActionOutcome> => {
    ran.push(a.type);
    return Promise.resolve(answers[a.type] ?? { done: false, actionOk: true });
  };
  return { ran, step };
}

describe('runActionSequence', () => {
  const click: CanonicalAction = { type: 'click', x: 0.5, y: 0.5 };
  const type: CanonicalAction = { type: 'type', text: 'hi\n' };
  const finished: CanonicalAction = { type: 'finished' };

  it('runs every action in order, pausing between them', async () => {
    const { ran, step } = recorder();
    let pauses = 0;
    const r = await runActionSequence([click, type, { type: 'wait' }], step, () => {
      pauses++;
      return Promise.resolve();
    });
    assert.deepEqual(ran, ['click', 'type', 'wait']);
    assert.equal(pauses, 2);
    assert.deepEqual(r, { done: false, actionOk: true, executed: 3 });
  });

  it('stops at the action that ends the episode', async () => {
    const { ran, step } = recorder({ finished: { done: true, actionOk: true } });
    const r = await runActionSequence([type, finished, click], step);
    assert.deepEqual(ran, ['type', 'finished']);
    assert.deepEqual(r, { done: true, actionOk: true, executed: 2 });
  });

  it('stops at a failed action and says which one failed', async () => {
    const { ran, step } = recorder({ type: { done: false, actionOk: false, error: 'no focused field' } });
    const r = await runActionSequence([click, type, click], step);
    assert.deepEqual(ran, ['click', 'type']);
    assert.deepEqual(r, {
      done: false,
      actionOk: false,
      error: 'action 2 of 3 (type): no focused field',
      executed: 2,
    });
  });

  it('an empty list is a failed step, not a silent success', async () => {
    const { ran, step } = recorder();
    const r = await runActionSequence([], step);
    assert.deepEqual(ran, []);
    assert.equal(r.actionOk, false);
  });
});

function solidHalves(width: number, height: number): Buffer {
  const png = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 4;
      const left = x < width / 2;
      png.data[p] = left ? 255 : 0;
      png.data[p + 1] = 0;
      png.data[p + 2] = left ? 0 : 255;
      png.data[p + 3] = 255;
    }
  }
  return PNG.sync.write(png);
}

const pixel = (png: PNG, x: number, y: number): number[] => {
  const p = (y * png.width + x) * 4;
  return [png.data[p], png.data[p + 1], png.data[p + 2], png.data[p + 3]] as number[];
};

describe('smartResizePng', () => {
  it('scales a small screenshot up to the smart-resized size, keeping its picture', () => {
    const r = smartResizePng(solidHalves(160, 160));
    assert.equal(r.resized, true);
    assert.deepEqual([r.width, r.height], [280, 280]);
    const out = PNG.sync.read(r.png);
    assert.deepEqual([out.width, out.height], [280, 280]);
    assert.deepEqual(pixel(out, 10, 10), [255, 0, 0, 255], 'left half stays red');
    assert.deepEqual(pixel(out, 270, 270), [0, 0, 255, 255], 'right half stays blue');
    // The colour edge stays in the middle (±1 px of blending).
    const edge = [...Array(280).keys()].find((x) => (pixel(out, x, 140)[2] ?? 0) > 127);
    assert.ok(edge !== undefined && Math.abs(edge - 140) <= 1, `edge at ${edge}`);
  });

  it('scales a screenshot down within maxPixels and averages instead of skipping pixels', () => {
    const r = smartResizePng(solidHalves(640, 400), { minPixels: 3136, maxPixels: 50176 });
    assert.deepEqual([r.width, r.height], [280, 168]);
    const out = PNG.sync.read(r.png);
    assert.deepEqual(pixel(out, 5, 5), [255, 0, 0, 255]);
    assert.deepEqual(pixel(out, 275, 160), [0, 0, 255, 255]);
  });

  it('leaves an image that already has its smart-resized size untouched', () => {
    const png = solidHalves(280, 280);
    const r = smartResizePng(png);
    assert.equal(r.resized, false);
    assert.ok(r.png.equals(png));
  });

  it('refuses bytes that are not a PNG', () => {
    assert.throws(() => smartResizePng(Buffer.from('not a png')));
  });
});
