/**
 * The syntax of UI-TARS action text, without meaning: `name(key='value', key=(x,y), …)` calls, one after
 * another (UI-TARS separates several actions of one response with a blank line). This layer only finds
 * the calls and their raw argument strings; actions/uitars.ts gives them meaning.
 *
 * It is lenient exactly where real model output is sloppy, the way the official parsers are, and says
 * so in `repairs`:
 * - a missing final `)` (the model stopped early) is added;
 * - an unescaped quote inside a quoted value (`content='It's done'`) is read as a literal character: a
 *   quote only closes the value when what follows it can end a value — `, name=`, `)` at the end of a
 *   line, or the end of the text;
 * - a call without `()` (`finished`) is read as a call without arguments.
 * Anything else is an error that names what is wrong (a `)` missing before the next action, a value
 * whose closing quote never comes, a stray character after a value).
 */

export interface RawCall {
  /** The action name as written. */
  name: string;
  /** Keyword arguments, values unquoted and unescaped. */
  args: Map<string, string>;
  /** Values given without a name (`hotkey('ctrl c')`). */
  positional: string[];
  /** The call's source text. */
  text: string;
  /** Leniencies applied while reading this call (empty when it was well-formed). */
  repairs: string[];
}

export type GrammarResult =
  | { ok: true; calls: RawCall[] }
  | {
      ok: false;
      /** `no_call`: the text does not start with an action call at all. */
      kind: 'no_call' | 'syntax';
      message: string;
      /** Name of the call being read when the error happened, and its 0-based position. */
      name?: string;
      callIndex: number;
      /** The text from the start of the failing call to the end (for keyword recovery). */
      rest?: string;
    };

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*/;
const isSpace = (c: string | undefined): boolean => c !== undefined && /\s/.test(c);
const isInlineSpace = (c: string | undefined): boolean => c === ' ' || c === '\t' || c === '\r';

class SyntaxFailure extends Error {}

const excerpt = (s: string, at: number, n = 24): string => {
  const piece = s.slice(at, at + n);
  return piece.length === 0 ? 'the end of the text' : `"${piece}${s.length > at + n ? '…' : ''}"`;
};

/** Python-style escapes the prompt asks for (\\', \\", \\n); unknown escapes keep their backslash. */
function unescapeChar(n: string): string | undefined {
  switch (n) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case '\\':
    case "'":
    case '"':
      return n;
    default:
      return undefined;
  }
}

class Scanner {
  i = 0;
  constructor(readonly src: string) {}

  get done(): boolean {
    return this.i >= this.src.length;
  }
  peek(offset = 0): string | undefined {
    return this.src[this.i + offset];
  }
  skipSpace(): void {
    while (isSpace(this.peek())) this.i++;
  }
  ident(): string | undefined {
    const m = IDENT.exec(this.src.slice(this.i));
    if (!m) return undefined;
    this.i += m[0].length;
    return m[0];
  }
  /** Only whitespace from `at` to the end of its line (or of the text)? */
  lineEndsAt(at: number): boolean {
    let k = at;
    while (isInlineSpace(this.src[k])) k++;
    return k >= this.src.length || this.src[k] === '\n';
  }

  /**
   * May the quote at `at` close a value? Only if what follows can follow a value: `, name=` (the next
   * argument), `,)` / `)` ending the call at a line end, the next action on a later line (the `)` is
   * then missing and reported), or the end of the text.
   */
  quoteCanClose(at: number): boolean {
    let k = at + 1;
    while (isSpace(this.src[k])) k++;
    if (k >= this.src.length) return true;
    if (this.src.slice(at + 1, k).includes('\n') && this.callStartsAt(k)) return true;
    const c = this.src[k];
    if (c === ')') return this.lineEndsAt(k + 1);
    if (c !== ',') return false;
    k++;
    while (isSpace(this.src[k])) k++;
    if (this.src[k] === ')') return this.lineEndsAt(k + 1);
    const m = IDENT.exec(this.src.slice(k));
    if (!m) return false;
    k += m[0].length;
    while (isSpace(this.src[k])) k++;
    return this.src[k] === '=';
  }

  quoted(call: string, arg: string, repairs: string[]): string {
    const q = this.peek() as string;
    const start = this.i;
    this.i++;
    let value = '';
    const literalQuotes: number[] = [];
    while (!this.done) {
      const c = this.peek() as string;
      if (c === '\\' && this.i + 1 < this.src.length) {
        const n = this.peek(1) as string;
        const u = unescapeChar(n);
        value += u ?? `\\${n}`;
        this.i += 2;
        continue;
      }
      if (c === q) {
        if (this.quoteCanClose(this.i)) {
          this.i++;
          if (literalQuotes.length > 0) {
            repairs.push(
              `${arg}: ${literalQuotes.length} unescaped ${q} inside the value read as literal (write them as \\${q})`
            );
          }
          return value;
        }
        literalQuotes.push(this.i);
      }
      value += c;
      this.i++;
    }
    const hint =
      literalQuotes.length > 0
        ? `; it contains an unescaped ${q} at ${excerpt(this.src, Math.max(start, (literalQuotes[0] ?? 0) - 8), 16)} (write quotes inside a value as \\${q})`
        : '';
    throw new SyntaxFailure(
      `${call}: the value of ${arg} opened with ${q} is never closed (missing closing ${q})${hint}`
    );
  }

  /** An unquoted value, e.g. start_box=(100,200): runs to a comma or `)` outside brackets. */
  bare(): string {
    let depth = 0;
    const start = this.i;
    while (!this.done) {
      const c = this.peek() as string;
      if ((c === ',' || c === ')') && depth === 0) break;
      if (c === '\n' && depth === 0) break;
      if (c === '(' || c === '[') depth++;
      if (c === ')' || c === ']') depth--;
      this.i++;
    }
    return this.src.slice(start, this.i).trim();
  }

  value(call: string, arg: string, repairs: string[]): string {
    const c = this.peek();
    return c === "'" || c === '"' ? this.quoted(call, arg, repairs) : this.bare();
  }

  /** Does an action call (`name(`) start at or after the whitespace at `at`? */
  callStartsAt(at: number): boolean {
    let k = at;
    while (isSpace(this.src[k])) k++;
    return /^[A-Za-z_][A-Za-z0-9_]*\s*\(/.test(this.src.slice(k));
  }

  /** The argument list after `(`, up to and including `)`. */
  argList(call: RawCall): void {
    for (let index = 0; ; index++) {
      this.skipSpace();
      if (this.done) {
        call.repairs.push(`${call.name}: added the missing final ")"`);
        return;
      }
      if (this.peek() === ')') {
        this.i++;
        return;
      }
      const before = this.i;
      const name = this.ident();
      if (name !== undefined) {
        this.skipSpace();
        if (this.peek() !== '=') {
          throw new SyntaxFailure(
            `${call.name}: expected "=" after the argument name ${name}, got ${excerpt(this.src, this.i)}`
          );
        }
        this.i++;
        this.skipSpace();
        call.args.set(name, this.value(call.name, name, call.repairs));
      } else {
        this.i = before;
        const c = this.peek();
        if (c === ',') throw new SyntaxFailure(`${call.name}: empty argument before ","`);
        call.positional.push(this.value(call.name, `argument ${index + 1}`, call.repairs));
      }
      const afterValue = this.i;
      while (isInlineSpace(this.peek())) this.i++;
      const c = this.peek();
      if (c === ',') {
        this.i++;
        continue;
      }
      if (c === ')') {
        this.i++;
        return;
      }
      if (this.done || this.src.slice(this.i).trim() === '') {
        this.i = this.src.length;
        call.repairs.push(`${call.name}: added the missing final ")"`);
        return;
      }
      if (this.callStartsAt(afterValue)) {
        throw new SyntaxFailure(`${call.name}: missing ")" to close ${call.name}( before the next action`);
      }
      throw new SyntaxFailure(
        `${call.name}: expected "," or ")" after ${name ?? `argument ${index + 1}`}, got ${excerpt(this.src, this.i)}`
      );
    }
  }
}

/**
 * Reads every call of an action section ("click(…)\n\ntype(…)"). A syntax error carries the failing
 * call's name and the text from its start (`rest`), so the caller can still recover a call that must
 * not be lost (the episode-ending `finished`).
 */
export function parseCalls(section: string): GrammarResult {
  const s = new Scanner(section);
  const calls: RawCall[] = [];
  for (;;) {
    s.skipSpace();
    if (s.done) break;
    const start = s.i;
    const name = s.ident();
    if (name === undefined) {
      return {
        ok: false,
        kind: calls.length === 0 ? 'no_call' : 'syntax',
        message:
          calls.length === 0
            ? `expected an action call such as click(start_box='(x,y)'), got ${excerpt(section, start)}`
            : `expected another action call after ${calls[calls.length - 1]?.name ?? ''}(…), got ${excerpt(section, start)}`,
        callIndex: calls.length,
      };
    }
    const call: RawCall = { name, args: new Map(), positional: [], text: '', repairs: [] };
    try {
      while (isInlineSpace(s.peek())) s.i++;
      if (s.peek() === '(') {
        s.i++;
        s.argList(call);
      } else if (s.lineEndsAt(s.i) && (s.done || s.callStartsAt(s.i) || section.slice(s.i).trim() === '')) {
        call.repairs.push(`${name}: read without "()" as a call without arguments`);
      } else if (!s.callStartsAt(start)) {
        const prev = calls[calls.length - 1]?.name;
        return {
          ok: false,
          kind: prev === undefined ? 'no_call' : 'syntax',
          message:
            prev === undefined
              ? `expected an action call such as click(start_box='(x,y)'), got ${excerpt(section, start)}`
              : `expected another action call after ${prev}(…), got ${excerpt(section, start)}`,
          name,
          callIndex: calls.length,
          rest: section.slice(start),
        };
      } else {
        throw new SyntaxFailure(`${name}: expected "(" after the action name, got ${excerpt(section, s.i)}`);
      }
    } catch (err) {
      if (!(err instanceof SyntaxFailure)) throw err;
      return {
        ok: false,
        kind: 'syntax',
        message: err.message,
        name,
        callIndex: calls.length,
        rest: section.slice(start),
      };
    }
    call.text = section.slice(start, s.i).trim();
    calls.push(call);
  }
  if (calls.length === 0) {
    return { ok: false, kind: 'no_call', message: 'the Action part is empty', callIndex: 0 };
  }
  return { ok: true, calls };
}

/** "Thought: …\nAction: …" → its parts. Without an "Action:" line the whole text is the action part. */
export function splitResponse(text: string): { thought: string; section: string; labelled: boolean } {
  // The first "Action:" that starts a line: an "Action:" inside typed content stays content.
  const m = /(?:^|\n)[ \t]*Action[ \t]*[:：]/.exec(text);
  if (!m) return { thought: '', section: text.trim(), labelled: false };
  const head = text.slice(0, m.index).trim();
  const thought = head.replace(/^(?:Thought|Action_Summary)[ \t]*[:：]\s*/, '').trim();
  return { thought, section: text.slice(m.index + m[0].length).trim(), labelled: true };
}
