/**
 * Executes a canonical action on a Playwright page (coordinates normalized → viewport pixels).
 * Invalid input (an unknown key name) is reported as `{ok: false}`: a failed step, not an env crash.
 */
import type { Page } from 'playwright-core';
import type { CanonicalAction } from '../../schemas/actions';

/** UI-TARS / pyautogui key names → Playwright key names. */
const KEY_MAP: Record<string, string> = {
  ctrl: 'Control',
  control: 'Control',
  alt: 'Alt',
  shift: 'Shift',
  cmd: 'Meta',
  meta: 'Meta',
  win: 'Meta',
  enter: 'Enter',
  return: 'Enter',
  tab: 'Tab',
  backspace: 'Backspace',
  delete: 'Delete',
  esc: 'Escape',
  escape: 'Escape',
  space: 'Space',
  up: 'ArrowUp',
  down: 'ArrowDown',
  left: 'ArrowLeft',
  right: 'ArrowRight',
  arrowup: 'ArrowUp',
  arrowdown: 'ArrowDown',
  arrowleft: 'ArrowLeft',
  arrowright: 'ArrowRight',
  home: 'Home',
  end: 'End',
  pageup: 'PageUp',
  pagedown: 'PageDown',
};

export function playwrightKey(k: string): string | undefined {
  const lower = k.toLowerCase();
  const mapped = KEY_MAP[lower];
  if (mapped) return mapped;
  if (/^[a-z0-9]$/.test(lower)) return lower;
  if (/^f([1-9]|1[0-2])$/.test(lower)) return lower.toUpperCase();
  if (k.length === 1) return k;
  return undefined;
}

/** Pixels the page scrolls per scroll action is the page's business; we send one wheel notch. */
const WHEEL_DELTA = 100;

export type ExecResult = { ok: true } | { ok: false; error: string };

export async function executeAction(
  page: Page,
  action: CanonicalAction,
  size: { width: number; height: number }
): Promise<ExecResult> {
  const px = (x: number) => x * size.width;
  const py = (y: number) => y * size.height;
  switch (action.type) {
    case 'click':
      await page.mouse.click(px(action.x), py(action.y));
      return { ok: true };
    case 'double_click':
      await page.mouse.dblclick(px(action.x), py(action.y));
      return { ok: true };
    case 'right_click':
      await page.mouse.click(px(action.x), py(action.y), { button: 'right' });
      return { ok: true };
    case 'drag':
      await page.mouse.move(px(action.x), py(action.y));
      await page.mouse.down();
      await page.mouse.move(px(action.x2), py(action.y2), { steps: 5 });
      await page.mouse.up();
      return { ok: true };
    case 'type': {
      // insertText is one CDP call per chunk (fast); newlines are real Enter presses (UI-TARS "submit").
      const parts = action.text.split('\n');
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i] ?? '';
        if (part.length > 0) await page.keyboard.insertText(part);
        if (i < parts.length - 1) await page.keyboard.press('Enter');
      }
      return { ok: true };
    }
    case 'hotkey': {
      const mapped = action.keys.map(playwrightKey);
      const bad = action.keys.filter((_, i) => mapped[i] === undefined);
      if (bad.length > 0) return { ok: false, error: `unknown key(s): ${bad.join(', ')}` };
      await page.keyboard.press(mapped.join('+'));
      return { ok: true };
    }
    case 'scroll': {
      await page.mouse.move(px(action.x ?? 0.5), py(action.y ?? 0.5));
      const d = action.direction;
      await page.mouse.wheel(
        d === 'left' ? -WHEEL_DELTA : d === 'right' ? WHEEL_DELTA : 0,
        d === 'up' ? -WHEEL_DELTA : d === 'down' ? WHEEL_DELTA : 0
      );
      return { ok: true };
    }
    case 'hover':
      await page.mouse.move(px(action.x), py(action.y));
      return { ok: true };
    case 'key_down':
    case 'key_up': {
      const key = playwrightKey(action.key);
      if (key === undefined) return { ok: false, error: `unknown key: ${action.key}` };
      await (action.type === 'key_down' ? page.keyboard.down(key) : page.keyboard.up(key));
      return { ok: true };
    }
    case 'wait':
    case 'finished':
    case 'call_user':
      return { ok: true };
  }
}
