/**
 * UI-TARS action text ⇄ canonical actions (schemas/actions.ts). Two coordinate conventions exist:
 * UI-TARS-1.5 (Qwen2.5-VL) writes absolute pixels of the smart-resized screenshot; UI-TARS (Qwen2-VL)
 * writes a 0–1000 relative grid. Canonical coordinates are always normalized to [0,1].
 *
 * Parsing never throws on bad model output: it returns `{ok: false, error: ActionParseError}` so the
 * step is recorded as a failed action and the episode continues by the task's rules.
 */
import { CanonicalActionSchema, type CanonicalAction } from '../schemas/actions';
import { ActionParseError } from './errors';
import { smartResize, type Size } from './smart-resize';

export type CoordSpace = { kind: 'absolute'; width: number; height: number } | { kind: 'relative1000' };
export type UiTarsModel = 'ui-tars-1.5' | 'ui-tars';

/** The coordinate space a model uses for a screenshot of `screen` pixels. */
export function uiTarsCoordSpace(screen: Size, model: UiTarsModel = 'ui-tars-1.5'): CoordSpace {
  if (model === 'ui-tars') return { kind: 'relative1000' };
  const r = smartResize(screen.height, screen.width);
  return { kind: 'absolute', width: r.width, height: r.height };
}

const spanX = (s: CoordSpace) => (s.kind === 'absolute' ? s.width : 1000);
const spanY = (s: CoordSpace) => (s.kind === 'absolute' ? s.height : 1000);

export interface RenderOptions {
  /** Wrap points in `<|box_start|>…<|box_end|>` (UI-TARS training format; DART's add_box_token). */
  boxTokens?: boolean;
}

function point(x: number, y: number, space: CoordSpace, opts: RenderOptions): string {
  const p = `(${Math.round(x * spanX(space))},${Math.round(y * spanY(space))})`;
  return opts.boxTokens === false ? p : `<|box_start|>${p}<|box_end|>`;
}

/** Quotes a string the way the parser unquotes it (backslash escapes for \, ' and newlines). */
export function quoteArg(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
}

/** Renders one canonical action as UI-TARS action text (the part after "Action: "). */
export function renderUiTarsAction(action: CanonicalAction, space: CoordSpace, opts: RenderOptions = {}): string {
  switch (action.type) {
    case 'click':
      return `click(start_box='${point(action.x, action.y, space, opts)}')`;
    case 'double_click':
      return `left_double(start_box='${point(action.x, action.y, space, opts)}')`;
    case 'right_click':
      return `right_single(start_box='${point(action.x, action.y, space, opts)}')`;
    case 'drag':
      return `drag(start_box='${point(action.x, action.y, space, opts)}', end_box='${point(action.x2, action.y2, space, opts)}')`;
    case 'type':
      return `type(content=${quoteArg(action.text)})`;
    case 'hotkey':
      return `hotkey(key=${quoteArg(action.keys.join(' '))})`;
    case 'scroll':
      return action.x !== undefined && action.y !== undefined
        ? `scroll(start_box='${point(action.x, action.y, space, opts)}', direction='${action.direction}')`
        : `scroll(direction='${action.direction}')`;
    case 'wait':
      return 'wait()';
    case 'finished':
      return action.content !== undefined ? `finished(content=${quoteArg(action.content)})` : 'finished()';
    case 'call_user':
      return 'call_user()';
  }
}

/** A full model response: "Thought: …\nAction: …" (the embedded policy writes an empty Thought). */
export function renderUiTarsResponse(
  action: CanonicalAction,
  space: CoordSpace,
  thought = '',
  opts: RenderOptions = {}
): string {
  return `Thought: ${thought}\nAction: ${renderUiTarsAction(action, space, opts)}`;
}

export type ParseResult =
  { ok: true; action: CanonicalAction; thought: string; actionText: string } | { ok: false; error: ActionParseError };

const fail = (code: ActionParseError['code'], msg: string, text: string): ParseResult => ({
  ok: false,
  error: new ActionParseError(code, msg, text),
});

/** Splits `name(args)` arguments into key → raw string, honouring quotes and backslash escapes. */
function parseArgs(src: string): Map<string, string> | string {
  const out = new Map<string, string>();
  let i = 0;
  const skipWs = () => {
    while (i < src.length && /\s/.test(src[i] ?? '')) i++;
  };
  while (true) {
    skipWs();
    if (i >= src.length) return out;
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i));
    if (!m) return `expected an argument name at "${src.slice(i, i + 20)}"`;
    const name = m[0];
    i += name.length;
    skipWs();
    if (src[i] !== '=') return `expected "=" after ${name}`;
    i++;
    skipWs();
    const q = src[i];
    let value = '';
    if (q === "'" || q === '"') {
      i++;
      let closed = false;
      while (i < src.length) {
        const c = src[i] ?? '';
        if (c === '\\' && i + 1 < src.length) {
          const n = src[i + 1] ?? '';
          value += n === 'n' ? '\n' : n === 't' ? '\t' : n;
          i += 2;
          continue;
        }
        if (c === q) {
          closed = true;
          i++;
          break;
        }
        value += c;
        i++;
      }
      if (!closed) return `unterminated string in ${name}`;
    } else {
      // Bare values (e.g. start_box=(1,2)) run to the next top-level comma.
      let depth = 0;
      while (i < src.length) {
        const c = src[i] ?? '';
        if (c === '(' || c === '[') depth++;
        if (c === ')' || c === ']') depth--;
        if (c === ',' && depth <= 0) break;
        value += c;
        i++;
      }
      value = value.trim();
    }
    out.set(name, value);
    skipWs();
    if (src[i] === ',') i++;
  }
}

/** "(x,y)", "<|box_start|>(x,y)<|box_end|>", "[x1,y1,x2,y2]" (box → centre) or "<point>x y</point>". */
function parseBox(raw: string, space: CoordSpace, text: string): { x: number; y: number } | ParseResult {
  const nums = (raw.match(/-?\d+(?:\.\d+)?/g) ?? []).map(Number);
  let px: number;
  let py: number;
  if (nums.length === 2) [px, py] = nums as [number, number];
  else if (nums.length === 4) {
    const [a, b, c, d] = nums as [number, number, number, number];
    px = (a + c) / 2;
    py = (b + d) / 2;
  } else return fail('bad_coordinates', `expected a point (x,y) or box (x1,y1,x2,y2), got "${raw}"`, text);
  const x = px / spanX(space);
  const y = py / spanY(space);
  if (!(x >= 0 && x <= 1 && y >= 0 && y <= 1)) {
    return fail(
      'out_of_range',
      `point (${px},${py}) is outside the ${spanX(space)}×${spanY(space)} coordinate space`,
      text
    );
  }
  return { x, y };
}

const NAME_ALIASES: Record<string, string> = {
  click: 'click',
  left_single: 'click',
  left_double: 'double_click',
  double_click: 'double_click',
  right_single: 'right_click',
  right_click: 'right_click',
  drag: 'drag',
  select: 'drag',
  type: 'type',
  hotkey: 'hotkey',
  press: 'hotkey',
  scroll: 'scroll',
  wait: 'wait',
  finished: 'finished',
  call_user: 'call_user',
};

/** Extracts the Thought and the first action call from a model response. */
function splitResponse(text: string): { thought: string; call: string } {
  const actionAt = text.lastIndexOf('Action:');
  const thoughtMatch = /Thought:\s*([\s\S]*?)(?=\n\s*Action:|$)/.exec(text);
  const thought = thoughtMatch?.[1]?.trim() ?? '';
  const body = actionAt >= 0 ? text.slice(actionAt + 'Action:'.length) : text;
  // Several actions may be separated by blank lines; the canonical step is the first one.
  const first = body.trim().split(/\n\s*\n/)[0] ?? '';
  return { thought, call: first.trim() };
}

/** Parses a model response ("Thought: …\nAction: …" or a bare action call) into a canonical action. */
export function parseUiTarsResponse(text: string, space: CoordSpace): ParseResult {
  if (typeof text !== 'string' || text.trim() === '') return fail('empty', 'empty model output', String(text));
  const { thought, call } = splitResponse(text);
  const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*\(([\s\S]*)\)\s*$/.exec(call);
  if (!m) return fail('no_action', `no action call found in "${call.slice(0, 80)}"`, text);
  const rawName = m[1] ?? '';
  const name = NAME_ALIASES[rawName];
  if (!name) return fail('unknown_action', `unknown action "${rawName}"`, text);
  const args = parseArgs(m[2] ?? '');
  if (typeof args === 'string') return fail('bad_arguments', `${rawName}: ${args}`, text);

  const box = (key: string, alt?: string): { x: number; y: number } | ParseResult => {
    const raw = args.get(key) ?? (alt ? args.get(alt) : undefined);
    if (raw === undefined) return fail('bad_arguments', `${rawName}: missing ${key}`, text);
    return parseBox(raw, space, text);
  };
  const isFail = (v: unknown): v is ParseResult => typeof v === 'object' && v !== null && 'ok' in v;

  let action: CanonicalAction;
  switch (name) {
    case 'click':
    case 'double_click':
    case 'right_click': {
      const p = box('start_box', 'point');
      if (isFail(p)) return p;
      action = { type: name, x: p.x, y: p.y };
      break;
    }
    case 'drag': {
      const a = box('start_box', 'start_point');
      if (isFail(a)) return a;
      const b = box('end_box', 'end_point');
      if (isFail(b)) return b;
      action = { type: 'drag', x: a.x, y: a.y, x2: b.x, y2: b.y };
      break;
    }
    case 'type': {
      const content = args.get('content');
      if (content === undefined) return fail('bad_arguments', 'type: missing content', text);
      action = { type: 'type', text: content };
      break;
    }
    case 'hotkey': {
      const k = args.get('key') ?? args.get('hotkey');
      const keys = (k ?? '').split(/\s+/).filter((s) => s.length > 0);
      if (keys.length === 0) return fail('bad_arguments', `${rawName}: missing key`, text);
      action = { type: 'hotkey', keys };
      break;
    }
    case 'scroll': {
      const direction = args.get('direction');
      if (direction !== 'up' && direction !== 'down' && direction !== 'left' && direction !== 'right') {
        return fail(
          'bad_arguments',
          `scroll: direction must be up, down, left or right, got "${direction ?? ''}"`,
          text
        );
      }
      if (args.has('start_box') || args.has('point')) {
        const p = box('start_box', 'point');
        if (isFail(p)) return p;
        action = { type: 'scroll', direction, x: p.x, y: p.y };
      } else action = { type: 'scroll', direction };
      break;
    }
    case 'finished': {
      const content = args.get('content');
      action = content !== undefined ? { type: 'finished', content } : { type: 'finished' };
      break;
    }
    case 'wait':
      action = { type: 'wait' };
      break;
    default:
      action = { type: 'call_user' };
  }
  // Final guard: whatever we built must be a valid canonical action (e.g. text length limits).
  const checked = CanonicalActionSchema.safeParse(action);
  if (!checked.success)
    return fail('bad_arguments', `${rawName}: ${checked.error.issues[0]?.message ?? 'invalid'}`, text);
  return { ok: true, action: checked.data, thought, actionText: call };
}
