/**
 * The UI-TARS parser against a corpus of realistic model responses (test/vlm/fixtures/uitars-corpus.json):
 * every action type, both coordinate conventions, every scroll-direction spelling, quotes and
 * apostrophes, several actions per response, a missing final ")", and malformed answers with the error
 * each must produce. Each case states its full expected parse, so a changed parse fails here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ActionParseError, parseUiTarsResponse, type CoordSpace, type UiTarsAction } from '../../actions';

interface OkExpectation {
  ok: true;
  actions: UiTarsAction[];
  thought?: string;
  repairs?: string[];
  unsupported?: string[];
}
interface FailExpectation {
  ok: false;
  code: ActionParseError['code'];
  message: string;
}
interface Case {
  name: string;
  space: string;
  text: string;
  expect: OkExpectation | FailExpectation;
}
interface Corpus {
  spaces: Record<string, CoordSpace>;
  cases: Case[];
}

const corpus = JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'uitars-corpus.json'), 'utf8')) as Corpus;

/** Types the canonical schema cannot run (none since hover/key_down/key_up joined it; kept for the check). */
const EXTRA_TYPES = new Set<string>();

function assertSameAction(actual: UiTarsAction | undefined, expected: UiTarsAction, where: string): void {
  assert.ok(actual, `${where}: action missing`);
  const a = actual as Record<string, unknown>;
  const e = expected as Record<string, unknown>;
  assert.deepEqual(Object.keys(a).sort(), Object.keys(e).sort(), `${where}: fields of ${JSON.stringify(a)}`);
  for (const [k, v] of Object.entries(e)) {
    if (typeof v === 'number')
      assert.ok(Math.abs((a[k] as number) - v) < 1e-9, `${where}: ${k} = ${String(a[k])}, want ${v}`);
    else assert.deepEqual(a[k], v, `${where}: ${k}`);
  }
}

describe('UI-TARS response corpus', () => {
  it('is large enough to mean something and covers every action type', () => {
    assert.ok(corpus.cases.length >= 60, `${corpus.cases.length} cases`);
    const seen = new Set<string>(corpus.cases.flatMap((c) => (c.expect.ok ? c.expect.actions.map((a) => a.type) : [])));
    for (const t of [
      'click',
      'double_click',
      'right_click',
      'drag',
      'type',
      'hotkey',
      'scroll',
      'wait',
      'finished',
      'call_user',
      'hover',
      'key_down',
      'key_up',
    ]) {
      assert.ok(seen.has(t), `no case parses to ${t}`);
    }
    assert.ok(
      corpus.cases.some((c) => !c.expect.ok),
      'malformed cases are included'
    );
  });

  for (const c of corpus.cases) {
    it(c.name, () => {
      const space = corpus.spaces[c.space];
      assert.ok(space, `unknown space ${c.space}`);
      const r = parseUiTarsResponse(c.text, space);
      if (!c.expect.ok) {
        assert.equal(r.ok, false, `should fail: ${r.ok ? JSON.stringify(r.actions) : ''}`);
        if (r.ok) return;
        assert.ok(r.error instanceof ActionParseError);
        assert.equal(r.error.code, c.expect.code, r.error.message);
        assert.match(r.error.message, new RegExp(c.expect.message));
        assert.equal(r.error.text, c.text, 'the raw text is kept');
        return;
      }
      assert.ok(r.ok, r.ok ? '' : `${r.error.code}: ${r.error.message}`);
      assert.equal(r.actions.length, c.expect.actions.length, JSON.stringify(r.actions));
      c.expect.actions.forEach((e, i) => assertSameAction(r.actions[i], e, `action ${i + 1}`));
      // The runnable ones are exactly the canonical ones, in order; `action` is the first.
      const runnable = c.expect.actions.filter((a) => !EXTRA_TYPES.has(a.type));
      assert.equal(r.canonicalActions.length, runnable.length);
      runnable.forEach((e, i) => assertSameAction(r.canonicalActions[i], e, `runnable ${i + 1}`));
      assertSameAction(r.action, runnable[0]!, 'action');
      assert.deepEqual(r.unsupported, c.expect.unsupported ?? []);
      if (c.expect.thought !== undefined) assert.equal(r.thought, c.expect.thought);
      const want = c.expect.repairs ?? [];
      if (want.length === 0) assert.deepEqual(r.repairs, [], 'a clean response needs no repair');
      for (const pattern of want) {
        assert.ok(
          r.repairs.some((note) => new RegExp(pattern).test(note)),
          `no repair matches /${pattern}/ in ${JSON.stringify(r.repairs)}`
        );
      }
    });
  }
});
