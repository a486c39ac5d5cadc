/**
 * UI-TARS action text ⇄ canonical actions (schemas/actions.ts). Two coordinate conventions exist:
 * UI-TARS-1.5 (Qwen2.5-VL) writes absolute pixels of the smart-resized screenshot; UI-TARS (Qwen2-VL)
 * writes a 0–1000 relative grid. Canonical coordinates are always normalized to [0,1].
 *
 * Parsing never throws on bad model output: it returns `{ok: false, error: ActionParseError}` so the
 * step is recorded as a failed action and the episode continues by the task's rules. The syntax
 * (calls, quotes, the leniencies of the official parsers) lives in ./uitars-grammar.ts; this module
 * gives the calls their meaning.
 *
 * Several actions in one response (separated by blank lines) are all returned, in order, as the
 * official parsers do. They belong to ONE step and are meant to run in order within it, stopping at
 * the first one that ends the episode or fails (./sequence.ts); DART joins them with a 1 s pause.
 * `action` is the first runnable one, for step loops that run a single action per step.
 */
import { CanonicalActionSchema, type CanonicalAction } from '../schemas/actions';
import { ActionParseError } from './errors';
import { smartResize, type SmartResizeOptions, type Size } from './smart-resize';
import { parseCalls, splitResponse, type RawCall } from './uitars-grammar';

export type CoordSpace = { kind: 'absolute'; width: number; height: number } | { kind: 'relative1000' };
export type UiTarsModel = 'ui-tars-1.5' | 'ui-tars';

/**
 * The coordinate space a model uses for a screenshot of `screen` pixels. `resize` must be the min/max
 * pixels the serving processor (or the client, vlm/screenshot.ts) resizes with: UI-TARS-1.5's pixels
 * are pixels of that resized image.
 */
export function uiTarsCoordSpace(
  screen: Size,
  model: UiTarsModel = 'ui-tars-1.5',
  resize: SmartResizeOptions = {}
): CoordSpace {
  if (model === 'ui-tars') return { kind: 'relative1000' };
  const r = smartResize(screen.height, screen.width, resize);
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
    case 'hover':
      return `hover(start_box='${point(action.x, action.y, space, opts)}')`;
    case 'key_down':
      return `keydown(key=${quoteArg(action.key)})`;
    case 'key_up':
      return `keyup(key=${quoteArg(action.key)})`;
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

/**
 * hover / keydown / keyup (DART executes them as pyautogui moveTo / keyDown / keyUp). They are canonical
 * actions now (schemas/actions.ts); the type stays so that a build whose schema lacks one still parses
 * it and reports it in `unsupported` instead of refusing it.
 */
export type UiTarsExtraAction =
  { type: 'hover'; x: number; y: number } | { type: 'key_down'; key: string } | { type: 'key_up'; key: string };
export type UiTarsAction = CanonicalAction | UiTarsExtraAction;

export type ParseResult =
  | {
      ok: true;
      /** The first runnable action: what a step loop that runs one action per step executes. */
      action: CanonicalAction;
      /** Every action of the response, in order. */
      actions: UiTarsAction[];
      /** The runnable (canonical) ones among `actions`, in order. */
      canonicalActions: CanonicalAction[];
      /** Actions parsed but not runnable yet (see UiTarsExtraAction), e.g. `hover`. */
      unsupported: string[];
      thought: string;
      /** The Action part of the response (every call). */
      actionText: string;
      /** Leniencies applied (missing final ")", unescaped quote read literally, …); empty when clean. */
      repairs: string[];
    }
  | { ok: false; error: ActionParseError };

const fail = (code: ActionParseError['code'], msg: string, text: string): ParseResult => ({
  ok: false,
  error: new ActionParseError(code, msg, text),
});

/** A failure while giving one call its meaning (turned into a ParseResult by the caller). */
class CallError extends Error {
  constructor(
    readonly code: ActionParseError['code'],
    message: string
  ) {
    super(message);
  }
}

const NUMBER = /-?\d+(?:\.\d+)?/g;

/**
 * "(x,y)", "<|box_start|>(x,y)<|box_end|>", "[x1,y1,x2,y2]" / "(x1,y1,x2,y2)" (box → centre),
 * "<point>x y</point>" or "<bbox>x1 y1 x2 y2</bbox>".
 */
function parseBox(raw: string, space: CoordSpace, call: string, arg: string): { x: number; y: number } {
  const nums = (raw.match(NUMBER) ?? []).map(Number);
  let px: number;
  let py: number;
  if (nums.length === 2) [px, py] = nums as [number, number];
  else if (nums.length === 4) {
    const [a, b, c, d] = nums as [number, number, number, number];
    px = (a + c) / 2;
    py = (b + d) / 2;
  } else {
    throw new CallError(
      'bad_coordinates',
      `${call}: ${arg} must be a point (x,y) or a box [x1,y1,x2,y2], got "${raw.slice(0, 60)}"`
    );
  }
  const x = px / spanX(space);
  const y = py / spanY(space);
  if (!(x >= 0 && x <= 1 && y >= 0 && y <= 1)) {
    const where =
      space.kind === 'absolute'
        ? `the ${space.width}×${space.height} smart-resized screenshot`
        : 'the 0–1000 relative grid';
    throw new CallError('out_of_range', `${call}: ${arg} (${px},${py}) is outside ${where}`);
  }
  return { x, y };
}

/**
 * Scroll directions as models write them: any case, and "upward(s)", "scroll down", "page down"… —
 * exactly one of up/down/left/right must appear (the official parser tests `"up" in direction.lower()`).
 */
export function normalizeScrollDirection(raw: string): 'up' | 'down' | 'left' | 'right' | undefined {
  const lower = raw.toLowerCase();
  const found = (['up', 'down', 'left', 'right'] as const).filter((d) => lower.includes(d));
  return found.length === 1 ? found[0] : undefined;
}

type Kind =
  | 'click'
  | 'double_click'
  | 'right_click'
  | 'drag'
  | 'type'
  | 'hotkey'
  | 'press'
  | 'key_down'
  | 'key_up'
  | 'hover'
  | 'scroll'
  | 'wait'
  | 'finished'
  | 'call_user';

/** Action names UI-TARS writes (and the official parsers accept) → what they mean. */
const ACTION_NAMES: Record<string, Kind> = {
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
  press: 'press',
  keydown: 'key_down',
  key_down: 'key_down',
  keyup: 'key_up',
  key_up: 'key_up',
  release: 'key_up',
  hover: 'hover',
  scroll: 'scroll',
  wait: 'wait',
  finished: 'finished',
  call_user: 'call_user',
};
export const UITARS_ACTION_NAMES: readonly string[] = Object.keys(ACTION_NAMES);

function argOf(call: RawCall, names: readonly string[], positional = true): string | undefined {
  for (const n of names) {
    const v = call.args.get(n);
    if (v !== undefined) return v;
  }
  return positional ? call.positional[0] : undefined;
}

function keysOf(call: RawCall): string[] {
  const raw = argOf(call, ['key', 'hotkey', 'keys', 'press']) ?? '';
  const words = raw
    .trim()
    .split(/\s+/)
    .filter((w) => w.length > 0);
  // "ctrl+c" is a common slip for "ctrl c"; a lone "+" stays the plus key.
  return words.flatMap((w) => (w.length > 1 && w.includes('+') ? w.split('+').filter((k) => k.length > 0) : [w]));
}

function meaning(call: RawCall, kind: Kind, space: CoordSpace): UiTarsAction {
  const name = call.name;
  const point = (names: readonly string[], what: string) => {
    const raw = argOf(call, names);
    if (raw === undefined || raw.trim() === '') {
      throw new CallError('bad_arguments', `${name}: missing ${names[0]} (${what}, e.g. ${names[0]}='(x,y)')`);
    }
    return parseBox(raw, space, name, names[0] ?? 'start_box');
  };
  const START = ['start_box', 'point', 'start_point'] as const;
  switch (kind) {
    case 'click':
    case 'double_click':
    case 'right_click':
    case 'hover': {
      const p = point(START, 'the target point');
      return { type: kind, x: p.x, y: p.y };
    }
    case 'drag': {
      const a = point(START, 'where the drag starts');
      const rawEnd = argOf(call, ['end_box', 'end_point'], false) ?? call.positional[1];
      if (rawEnd === undefined || rawEnd.trim() === '') {
        throw new CallError('bad_arguments', `${name}: missing end_box (where the drag ends, e.g. end_box='(x,y)')`);
      }
      const b = parseBox(rawEnd, space, name, 'end_box');
      return { type: 'drag', x: a.x, y: a.y, x2: b.x, y2: b.y };
    }
    case 'type': {
      const content = argOf(call, ['content', 'text']);
      if (content === undefined) {
        throw new CallError('bad_arguments', `${name}: missing content (the text to type, e.g. content='hello')`);
      }
      return { type: 'type', text: content };
    }
    case 'hotkey':
    case 'press': {
      const keys = keysOf(call);
      if (keys.length === 0) throw new CallError('bad_arguments', `${name}: missing key (e.g. key='ctrl c')`);
      return { type: 'hotkey', keys };
    }
    case 'key_down':
    case 'key_up': {
      const keys = keysOf(call);
      if (keys.length !== 1) {
        throw new CallError(
          'bad_arguments',
          `${name}: key must be exactly one key (e.g. key='shift'), got "${argOf(call, ['key']) ?? ''}"`
        );
      }
      return { type: kind, key: keys[0] as string };
    }
    case 'scroll': {
      const raw = argOf(call, ['direction'], false) ?? call.positional.find((v) => normalizeScrollDirection(v));
      const direction = raw === undefined ? undefined : normalizeScrollDirection(raw);
      if (!direction) {
        throw new CallError(
          'bad_arguments',
          `${name}: direction must be up, down, left or right, got "${raw ?? '(none)'}"`
        );
      }
      const at = argOf(call, START, false);
      if (at === undefined) return { type: 'scroll', direction };
      const p = parseBox(at, space, name, 'start_box');
      return { type: 'scroll', direction, x: p.x, y: p.y };
    }
    case 'wait':
      return { type: 'wait' };
    case 'finished': {
      const content = argOf(call, ['content']);
      return content !== undefined && content !== '' ? { type: 'finished', content } : { type: 'finished' };
    }
    case 'call_user':
      return { type: 'call_user' };
  }
}

/**
 * `finished(` whose arguments do not parse (an unterminated quote, a truncated answer): the model did
 * say the task is over, so the episode must end; the content is kept as well as it can be read.
 */
function recoverFinished(rest: string, why: string): RawCall {
  let body = rest.replace(/^[A-Za-z_]+\s*\(?/, '');
  body = body.replace(/^\s*content\s*=\s*/, '').replace(/^[\s:–—-]+/, '');
  body = body.replace(/\)\s*$/, '').trim();
  const q = body[0];
  if (q === "'" || q === '"') {
    body = body.slice(1);
    if (body.endsWith(q)) body = body.slice(0, -1);
  }
  const content = body.replace(/\\(['"\\])/g, '$1').replace(/\\n/g, '\n');
  const args = new Map<string, string>();
  if (content.trim() !== '') args.set('content', content);
  return {
    name: 'finished',
    args,
    positional: [],
    text: rest.trim(),
    repairs: [`${why}; read leniently as finished (it ends the episode)`],
  };
}

const plural = (n: number) => (n === 1 ? '' : 's');

/** Parses a model response ("Thought: …\nAction: …" or a bare action call) into its actions. */
export function parseUiTarsResponse(text: string, space: CoordSpace): ParseResult {
  if (typeof text !== 'string' || text.trim() === '') return fail('empty', 'empty model output', String(text));
  const { thought, section, labelled } = splitResponse(text);
  if (section === '') return fail('no_action', 'the "Action:" part is empty', text);
  if (!labelled && !/^[A-Za-z_][A-Za-z0-9_]*\s*\(/.test(section)) {
    return fail('no_action', `no "Action:" line and no action call found in "${section.slice(0, 80)}"`, text);
  }

  const grammar = parseCalls(section);
  let calls: RawCall[];
  if (grammar.ok) calls = grammar.calls;
  else if (grammar.name !== undefined && grammar.name.toLowerCase() === 'finished' && grammar.rest !== undefined) {
    // Everything before the broken finished parsed; finished ends the episode, so nothing after matters.
    const before = parseCalls(section.slice(0, section.length - grammar.rest.length));
    calls = [...(before.ok ? before.calls : []), recoverFinished(grammar.rest, grammar.message)];
  } else {
    const where = grammar.callIndex > 0 ? `action ${grammar.callIndex + 1}: ` : '';
    return fail(grammar.kind === 'no_call' ? 'no_action' : 'bad_arguments', `${where}${grammar.message}`, text);
  }

  const actions: UiTarsAction[] = [];
  const canonicalActions: CanonicalAction[] = [];
  const unsupported: string[] = [];
  const repairs: string[] = [];
  for (const [i, call] of calls.entries()) {
    const where = calls.length > 1 ? `action ${i + 1} of ${calls.length}: ` : '';
    const kind = ACTION_NAMES[call.name.toLowerCase()];
    if (!kind) {
      return fail(
        'unknown_action',
        `${where}unknown action "${call.name}"; known actions: ${UITARS_ACTION_NAMES.join(', ')}`,
        text
      );
    }
    let action: UiTarsAction;
    try {
      action = meaning(call, kind, space);
    } catch (err) {
      if (err instanceof CallError) return fail(err.code, `${where}${err.message}`, text);
      throw err;
    }
    repairs.push(...call.repairs);
    actions.push(action);
    const checked = CanonicalActionSchema.safeParse(action);
    if (checked.success) canonicalActions.push(checked.data);
    else if (kind === 'hover' || kind === 'key_down' || kind === 'key_up') unsupported.push(call.name);
    else {
      // Whatever we built must be a valid canonical action (e.g. text length limits).
      const issue = checked.error.issues[0];
      return fail(
        'bad_arguments',
        `${where}${call.name}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? 'invalid'}`,
        text
      );
    }
    if (action.type === 'finished' || action.type === 'call_user') {
      if (i + 1 < calls.length)
        repairs.push(`ignored ${calls.length - i - 1} action${plural(calls.length - i - 1)} after ${call.name}`);
      break;
    }
  }
  const first = canonicalActions[0];
  if (!first) {
    return fail(
      'unknown_action',
      `${unsupported.join(', ')} cannot run yet: the canonical action schema (schemas/actions.ts) has no ${unsupported.join('/')} action`,
      text
    );
  }
  return { ok: true, action: first, actions, canonicalActions, unsupported, thought, actionText: section, repairs };
}
