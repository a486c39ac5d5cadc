/**
 * The embedded policy's flat categorical action space ↔ canonical actions. Index layout:
 * [0, G²) click cells, row-major (index = r·G + c); then the 16 tokens of spec.TOKEN_NAMES.
 * Cell (r, c) clicks its centre ((c+0.5)/G, (r+0.5)/G) in normalised screen coordinates.
 */
import type { CanonicalAction } from '../schemas/actions';
import { MASK_OFF, numActions, numCells, TOKEN_NAMES, type PolicySpec, type TokenName } from './spec';

export type { CanonicalAction };
type GridSpec = Pick<PolicySpec, 'gridSize'>;

/** Per-task context an action index needs: the strings type_field[k] types. */
export interface ActionContext {
  fields: readonly string[];
}

const TYPE_FIELDS = 4;
const KEY_TOKENS: Partial<Record<TokenName, string>> = {
  key_enter: 'enter',
  key_tab: 'tab',
  key_backspace: 'backspace',
  key_escape: 'escape',
};
const KEY_ALIASES: Record<string, string> = { return: 'enter', esc: 'escape' };

export function tokenIndex(spec: GridSpec, token: TokenName): number {
  return numCells(spec) + TOKEN_NAMES.indexOf(token);
}

/** Decodes an action index; throws for reserved slots or a type_field with no such field. */
export function actionFromIndex(spec: GridSpec, index: number, ctx: ActionContext): CanonicalAction {
  const G = spec.gridSize;
  if (!Number.isInteger(index) || index < 0 || index >= numActions(spec))
    throw new Error(`action index ${index} out of range`);
  if (index < numCells(spec)) {
    const r = Math.floor(index / G);
    const c = index % G;
    return { type: 'click', x: (c + 0.5) / G, y: (r + 0.5) / G };
  }
  const token = TOKEN_NAMES[index - numCells(spec)]!;
  if (token.startsWith('type_field_')) {
    const k = Number(token.slice('type_field_'.length));
    const text = ctx.fields[k];
    if (text === undefined) throw new Error(`action ${token}: the task has only ${ctx.fields.length} fields`);
    return { type: 'type', text };
  }
  const key = KEY_TOKENS[token];
  if (key) return { type: 'hotkey', keys: [key] };
  if (token === 'scroll_up' || token === 'scroll_down')
    return { type: 'scroll', direction: token === 'scroll_up' ? 'up' : 'down', x: 0.5, y: 0.5 };
  if (token === 'wait') return { type: 'wait' };
  if (token === 'finished') return { type: 'finished' };
  throw new Error(`action ${token} is reserved`);
}

/**
 * The index a demonstration's action maps to (BC targets), or null when the action space cannot express
 * it (drag, double/right click, free text that is no field, key chords, horizontal scroll, call_user).
 * Clicks go to the cell containing the point, i.e. the nearest cell centre.
 */
export function indexFromAction(spec: GridSpec, action: CanonicalAction, ctx: ActionContext): number | null {
  const G = spec.gridSize;
  const cellOf = (v: number): number => Math.min(G - 1, Math.max(0, Math.floor(v * G)));
  switch (action.type) {
    case 'click':
      return cellOf(action.y) * G + cellOf(action.x);
    case 'type': {
      const k = ctx.fields.indexOf(action.text);
      return k >= 0 && k < TYPE_FIELDS ? tokenIndex(spec, `type_field_${k}` as TokenName) : null;
    }
    case 'hotkey': {
      if (action.keys.length !== 1) return null;
      const raw = action.keys[0]!.toLowerCase();
      const key = KEY_ALIASES[raw] ?? raw;
      const token = (Object.keys(KEY_TOKENS) as TokenName[]).find((t) => KEY_TOKENS[t] === key);
      return token ? tokenIndex(spec, token) : null;
    }
    case 'scroll':
      return action.direction === 'up'
        ? tokenIndex(spec, 'scroll_up')
        : action.direction === 'down'
          ? tokenIndex(spec, 'scroll_down')
          : null;
    case 'wait':
      return tokenIndex(spec, 'wait');
    case 'finished':
      return tokenIndex(spec, 'finished');
    default:
      return null;
  }
}

export interface MaskOptions {
  /** Number of typeable fields of the task (type_field_k is valid for k < numFields). */
  numFields: number;
  /** If given, only these tokens may be chosen (besides clicks); e.g. a click-only task passes []. */
  allowedTokens?: readonly TokenName[];
  /** Disable the click grid (rarely useful; default false). */
  noClicks?: boolean;
}

/** Additive mask row [A]: 0 for valid actions, MASK_OFF for invalid ones. Reserved slots are always off. */
export function actionMask(spec: GridSpec, opts: MaskOptions): Float32Array {
  const mask = new Float32Array(numActions(spec));
  if (opts.noClicks) mask.fill(MASK_OFF, 0, numCells(spec));
  TOKEN_NAMES.forEach((token, t) => {
    let ok = !token.startsWith('reserved_');
    if (token.startsWith('type_field_')) ok = Number(token.slice('type_field_'.length)) < opts.numFields;
    if (opts.allowedTokens && !opts.allowedTokens.includes(token)) ok = false;
    if (!ok) mask[numCells(spec) + t] = MASK_OFF;
  });
  return mask;
}
