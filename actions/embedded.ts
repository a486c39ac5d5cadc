/**
 * The embedded policy's discrete action space (env-and-policy.md B7): 272 entries = 256 click cells of a
 * 16×16 grid (the click lands at the cell centre) + 16 tokens. Shared by the random policy, the oracle
 * (to express demos as indices for BC warm starts) and the ONNX policy client. Node-free.
 */
import { TOKEN_NAMES } from '../policy/spec';
import type { CanonicalAction } from '../schemas/actions';

export const GRID = 16;
export const NUM_CLICK_CELLS = GRID * GRID;
/** The token layout is the policy spec's (one source of truth for the 272-entry action space). */
export const EMBEDDED_TOKENS = TOKEN_NAMES;
export type EmbeddedToken = (typeof EMBEDDED_TOKENS)[number];
export const EMBEDDED_ACTION_COUNT = NUM_CLICK_CELLS + EMBEDDED_TOKENS.length; // 272

const KEY_TOKENS: Record<string, string> = {
  key_enter: 'enter',
  key_tab: 'tab',
  key_backspace: 'backspace',
  key_escape: 'escape',
};

/** Index → canonical action; null for reserved slots and type_field[k] with no k-th field (masked). */
export function embeddedIndexToAction(index: number, fields: readonly string[]): CanonicalAction | null {
  if (!Number.isInteger(index) || index < 0 || index >= EMBEDDED_ACTION_COUNT) return null;
  if (index < NUM_CLICK_CELLS) {
    const r = Math.floor(index / GRID);
    const c = index % GRID;
    return { type: 'click', x: (c + 0.5) / GRID, y: (r + 0.5) / GRID };
  }
  const tok = EMBEDDED_TOKENS[index - NUM_CLICK_CELLS];
  if (!tok) return null;
  if (tok.startsWith('type_field_')) {
    const f = fields[Number(tok.slice(-1))];
    return f === undefined ? null : { type: 'type', text: f };
  }
  const key = KEY_TOKENS[tok];
  if (key) return { type: 'hotkey', keys: [key] };
  if (tok === 'scroll_up') return { type: 'scroll', direction: 'up' };
  if (tok === 'scroll_down') return { type: 'scroll', direction: 'down' };
  if (tok === 'wait') return { type: 'wait' };
  if (tok === 'finished') return { type: 'finished' };
  return null;
}

/** Valid-action mask for a task with these fields (reserved slots and missing fields are invalid). */
export function embeddedValidMask(fields: readonly string[]): boolean[] {
  return Array.from({ length: EMBEDDED_ACTION_COUNT }, (_, i) => embeddedIndexToAction(i, fields) !== null);
}

/**
 * Canonical action → the embedded index that expresses it, if any: clicks map to the cell containing
 * the point, `type` to the field it equals, single known keys and coordinate-free scrolls to tokens.
 */
export function embeddedActionToIndex(a: CanonicalAction, fields: readonly string[]): number | undefined {
  const tok = (t: EmbeddedToken) => NUM_CLICK_CELLS + EMBEDDED_TOKENS.indexOf(t);
  switch (a.type) {
    case 'click': {
      const c = Math.min(GRID - 1, Math.floor(a.x * GRID));
      const r = Math.min(GRID - 1, Math.floor(a.y * GRID));
      return r * GRID + c;
    }
    case 'type': {
      const k = fields.indexOf(a.text);
      return k >= 0 && k < 4 ? tok(`type_field_${k}` as EmbeddedToken) : undefined;
    }
    case 'hotkey': {
      if (a.keys.length !== 1) return undefined;
      const k = (a.keys[0] ?? '').toLowerCase();
      const hit = Object.entries(KEY_TOKENS).find(([, v]) => v === k || (v === 'escape' && k === 'esc'));
      return hit ? tok(hit[0] as EmbeddedToken) : undefined;
    }
    case 'scroll':
      return a.direction === 'up' ? tok('scroll_up') : a.direction === 'down' ? tok('scroll_down') : undefined;
    case 'wait':
      return tok('wait');
    case 'finished':
      return tok('finished');
    default:
      return undefined;
  }
}
