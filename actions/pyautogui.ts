/**
 * Canonical action → pyautogui code, as OSWorld's `pyautogui` action space executes it (DART's
 * ui_tars_utils conventions: scroll ±5 clicks, WAIT/DONE/FAIL literals, key aliases).
 */
import type { CanonicalAction } from '../schemas/actions';
import type { Size } from './smart-resize';

const py = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;

const KEY_ALIASES: Record<string, string> = {
  arrowleft: 'left',
  arrowright: 'right',
  arrowup: 'up',
  arrowdown: 'down',
  space: ' ',
  escape: 'esc',
  control: 'ctrl',
};
const pyKey = (k: string) => KEY_ALIASES[k.toLowerCase()] ?? k.toLowerCase();

export function renderPyautogui(action: CanonicalAction, screen: Size): string {
  const X = (x: number) => Math.round(x * screen.width);
  const Y = (y: number) => Math.round(y * screen.height);
  switch (action.type) {
    case 'click':
      return `pyautogui.click(${X(action.x)}, ${Y(action.y)}, button='left')`;
    case 'double_click':
      return `pyautogui.doubleClick(${X(action.x)}, ${Y(action.y)}, button='left')`;
    case 'right_click':
      return `pyautogui.click(${X(action.x)}, ${Y(action.y)}, button='right')`;
    case 'drag':
      return `pyautogui.moveTo(${X(action.x)}, ${Y(action.y)})\npyautogui.dragTo(${X(action.x2)}, ${Y(action.y2)}, duration=1.0)`;
    case 'type': {
      // A trailing newline means "submit" in UI-TARS: type the text, then press enter.
      const submit = action.text.endsWith('\n');
      const body = submit ? action.text.slice(0, -1) : action.text;
      return `pyautogui.write(${py(body)}, interval=0.1)` + (submit ? `\npyautogui.press('enter')` : '');
    }
    case 'hotkey':
      return `pyautogui.hotkey(${action.keys.map((k) => py(pyKey(k))).join(', ')})`;
    case 'scroll': {
      const at = action.x !== undefined && action.y !== undefined ? `, x=${X(action.x)}, y=${Y(action.y)}` : '';
      if (action.direction === 'up' || action.direction === 'down') {
        return `pyautogui.scroll(${action.direction === 'up' ? 5 : -5}${at})`;
      }
      // DART emits no code for horizontal scrolls; hscroll is the faithful pyautogui equivalent.
      return `pyautogui.hscroll(${action.direction === 'right' ? 5 : -5}${at})`;
    }
    case 'wait':
      return 'WAIT';
    case 'finished':
      return 'DONE';
    case 'call_user':
      return 'FAIL';
    case 'hover':
      return `pyautogui.moveTo(${X(action.x)}, ${Y(action.y)})`;
    case 'key_down':
      return `pyautogui.keyDown(${py(pyKey(action.key))})`;
    case 'key_up':
      return `pyautogui.keyUp(${py(pyKey(action.key))})`;
  }
}
