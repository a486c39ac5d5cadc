import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CanonicalAction } from '../../schemas/actions';
import {
  ActionParseError,
  parseUiTarsResponse,
  renderPyautogui,
  renderUiTarsAction,
  renderUiTarsResponse,
  smartResize,
  uiTarsCoordSpace,
  type CoordSpace,
} from '../../actions';

test('smartResize matches the Qwen2.5-VL processor on known sizes', () => {
  assert.deepEqual(smartResize(1080, 1920), { width: 1932, height: 1092 });
  assert.deepEqual(smartResize(160, 160), { width: 280, height: 280 }); // below min pixels: scaled up
  assert.deepEqual(smartResize(720, 1280), { width: 1288, height: 728 });
  const big = smartResize(4000, 6000); // above max pixels: scaled down
  assert.ok(big.width * big.height <= 16384 * 28 * 28);
  assert.equal(big.width % 28, 0);
  assert.equal(big.height % 28, 0);
  assert.throws(() => smartResize(0, 10), RangeError);
});

const samples: CanonicalAction[] = [
  { type: 'click', x: 0.25, y: 0.75 },
  { type: 'double_click', x: 0.5, y: 0.5 },
  { type: 'right_click', x: 0.1, y: 0.9 },
  { type: 'drag', x: 0.1, y: 0.2, x2: 0.8, y2: 0.9 },
  { type: 'type', text: 'it\'s a "test"\\ with newline\n' },
  { type: 'hotkey', keys: ['ctrl', 'c'] },
  { type: 'scroll', direction: 'down', x: 0.5, y: 0.5 },
  { type: 'scroll', direction: 'up' },
  { type: 'wait' },
  { type: 'finished', content: 'done' },
  { type: 'finished' },
  { type: 'call_user' },
];

const spaces: [string, CoordSpace][] = [
  ['ui-tars-1.5 160×160', uiTarsCoordSpace({ width: 160, height: 160 })],
  ['ui-tars-1.5 1920×1080', uiTarsCoordSpace({ width: 1920, height: 1080 })],
  ['ui-tars 0–1000', uiTarsCoordSpace({ width: 1920, height: 1080 }, 'ui-tars')],
];

function close(a: CanonicalAction, b: CanonicalAction, tol: number): void {
  assert.equal(a.type, b.type);
  for (const k of ['x', 'y', 'x2', 'y2'] as const) {
    const va = (a as Record<string, unknown>)[k];
    const vb = (b as Record<string, unknown>)[k];
    if (typeof va === 'number' && typeof vb === 'number') assert.ok(Math.abs(va - vb) <= tol, `${k}: ${va} vs ${vb}`);
    else assert.equal(va, vb);
  }
  const strip = (x: CanonicalAction) => JSON.stringify({ ...x, x: 0, y: 0, x2: 0, y2: 0 });
  assert.equal(strip(a), strip(b));
}

for (const [name, space] of spaces) {
  test(`UI-TARS text round-trips every action type (${name})`, () => {
    const tol = space.kind === 'absolute' ? 0.5 / Math.min(space.width, space.height) : 0.0005;
    for (const a of samples) {
      for (const boxTokens of [true, false]) {
        const text = renderUiTarsResponse(a, space, 'thinking', { boxTokens });
        const parsed = parseUiTarsResponse(text, space);
        assert.ok(parsed.ok, `${text} → ${parsed.ok ? '' : parsed.error.message}`);
        close(parsed.action, a, tol);
        assert.equal(parsed.thought, 'thinking');
        // Rendering the parsed action reproduces the text exactly (the pixel grid is a fixed point).
        assert.equal(
          renderUiTarsAction(parsed.action, space, { boxTokens }),
          renderUiTarsAction(a, space, { boxTokens })
        );
      }
    }
  });
}

test('UI-TARS-1.5 coordinates are pixels of the smart-resized image', () => {
  const space = uiTarsCoordSpace({ width: 1920, height: 1080 });
  assert.equal(
    renderUiTarsAction({ type: 'click', x: 0.5, y: 0.5 }, space),
    "click(start_box='<|box_start|>(966,546)<|box_end|>')"
  );
  const r = parseUiTarsResponse("Thought: open it\nAction: click(start_box='(966,546)')", space);
  assert.ok(r.ok);
  assert.deepEqual(r.action, { type: 'click', x: 0.5, y: 0.5 });
  const rel = parseUiTarsResponse("Action: left_single(start_box='(500,250)')", { kind: 'relative1000' });
  assert.ok(rel.ok);
  assert.deepEqual(rel.action, { type: 'click', x: 0.5, y: 0.25 });
  const boxed = parseUiTarsResponse("click(start_box='[100,100,200,300]')", { kind: 'relative1000' });
  assert.ok(boxed.ok);
  assert.deepEqual(boxed.action, { type: 'click', x: 0.15, y: 0.2 });
  const pressed = parseUiTarsResponse("Action: press(key='enter')", space);
  assert.ok(pressed.ok);
  assert.deepEqual(pressed.action, { type: 'hotkey', keys: ['enter'] });
});

test('malformed action text is a typed ActionParseError, never a throw', () => {
  const space = uiTarsCoordSpace({ width: 160, height: 160 });
  const bad: [string, string][] = [
    ['', 'empty'],
    ['Thought: hmm\nAction:', 'no_action'],
    ['Action: fly(to=moon)', 'unknown_action'],
    ["Action: click(start_box='(1)')", 'bad_coordinates'],
    ["Action: click(start_box='(999,10)')", 'out_of_range'],
    ["Action: click(start_box='(1,2)", 'bad_arguments'],
    ["Action: type(content='unterminated)", 'bad_arguments'],
    ["Action: scroll(direction='sideways')", 'bad_arguments'],
    ['Action: hotkey()', 'bad_arguments'],
    ['Action: click()', 'bad_arguments'],
  ];
  for (const [text, code] of bad) {
    const r = parseUiTarsResponse(text, space);
    assert.equal(r.ok, false, text);
    if (!r.ok) {
      assert.ok(r.error instanceof ActionParseError);
      assert.equal(r.error.code, code, `${text}: ${r.error.message}`);
    }
  }
  // Not even a non-string can make it throw.
  assert.equal(parseUiTarsResponse(undefined as unknown as string, space).ok, false);
});

test('pyautogui rendering follows OSWorld conventions', () => {
  const s = { width: 1920, height: 1080 };
  assert.equal(renderPyautogui({ type: 'click', x: 0.5, y: 0.5 }, s), "pyautogui.click(960, 540, button='left')");
  assert.equal(renderPyautogui({ type: 'right_click', x: 0, y: 1 }, s), "pyautogui.click(0, 1080, button='right')");
  assert.equal(
    renderPyautogui({ type: 'double_click', x: 0.5, y: 0.5 }, s),
    "pyautogui.doubleClick(960, 540, button='left')"
  );
  assert.equal(
    renderPyautogui({ type: 'drag', x: 0, y: 0, x2: 1, y2: 1 }, s),
    'pyautogui.moveTo(0, 0)\npyautogui.dragTo(1920, 1080, duration=1.0)'
  );
  assert.equal(
    renderPyautogui({ type: 'type', text: "it's\n" }, s),
    "pyautogui.write('it\\'s', interval=0.1)\npyautogui.press('enter')"
  );
  assert.equal(renderPyautogui({ type: 'hotkey', keys: ['ctrl', 'ArrowLeft'] }, s), "pyautogui.hotkey('ctrl', 'left')");
  assert.equal(
    renderPyautogui({ type: 'scroll', direction: 'down', x: 0.5, y: 0.5 }, s),
    'pyautogui.scroll(-5, x=960, y=540)'
  );
  assert.equal(renderPyautogui({ type: 'scroll', direction: 'up' }, s), 'pyautogui.scroll(5)');
  assert.equal(renderPyautogui({ type: 'wait' }, s), 'WAIT');
  assert.equal(renderPyautogui({ type: 'finished' }, s), 'DONE');
  assert.equal(renderPyautogui({ type: 'call_user' }, s), 'FAIL');
});
