/**
 * The instruction encoder (issue 14): every word the task suite can put into an instruction has its
 * own input slot under the default spec's `words-v1` encoding, while spec v1's hashed encoding mapped
 * distinct suite words to one bucket.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeInstruction, tokenize } from '../../policy/observation';
import { defaultPolicySpec as spec, legacyPolicySpec, validateSpec } from '../../policy/spec';
import { fnv1a, vocabularyWords, wordSlot, WORDS_V1 } from '../../policy/vocabulary';
import { allPageInstructions } from './page-instructions';

// 400 seeds per family reach every template, colour/shape/label/word and every tick-checkboxes list size.
const SUITE = allPageInstructions(400);
const suiteWords = (): Set<string> => new Set([...SUITE.values()].flat().flatMap((s) => tokenize(s)));

/** Groups of distinct words that share a slot. */
function collisions(words: Iterable<string>, slot: (w: string) => number): string[][] {
  const bySlot = new Map<number, string[]>();
  for (const w of words) bySlot.set(slot(w), [...(bySlot.get(slot(w)) ?? []), w]);
  return [...bySlot.values()].filter((ws) => ws.length > 1);
}

test('the page generators produce the expected variety (the enumeration is not vacuous)', () => {
  const words = suiteWords();
  assert.equal(SUITE.size, 8);
  for (const [family, xs] of SUITE) assert.ok(new Set(xs).size >= 5, `${family}: ${new Set(xs).size} instructions`);
  for (const w of ['tick', 'black', 'menu', 'cyan', 'row', 'panda', 'ok', 'send', 'grape', 'lemon', 'amber'])
    assert.ok(words.has(w), `suite word ${w}`);
});

test('every suite word is in the words-v1 list and distinct words get distinct slots', () => {
  const words = suiteWords();
  const missing = [...words].filter((w) => !WORDS_V1.includes(w));
  assert.deepEqual(missing, [], `words a page generates but words-v1 lacks (add them as a new encoding)`);
  assert.equal(new Set(WORDS_V1).size, WORDS_V1.length, 'words-v1 has duplicates');
  const slot = (w: string) => wordSlot(w, spec.textEncoding, spec.vocabSize);
  assert.deepEqual(collisions(words, slot), []);
  for (const w of words) assert.ok(slot(w) < vocabularyWords(spec.textEncoding), `${w} is not out-of-vocabulary`);
  // Distinct bags of words get distinct input vectors ("Tick red and blue" and "Tick blue and red" are
  // one bag, and one task: the same boxes).
  const all = [...new Set([...SUITE.values()].flat())];
  const bags = new Set(all.map((s) => tokenize(s).sort().join(' ')));
  const vectors = new Set(all.map((s) => encodeInstruction(s, spec).join(',')));
  assert.ok(bags.size > 100, `${bags.size} bags`);
  assert.equal(vectors.size, bags.size);
});

test('spec v1 hashing collides on suite words; words-v1 does not (the issue-14 pairs)', () => {
  const hashed = (w: string) => wordSlot(w, legacyPolicySpec.textEncoding, legacyPolicySpec.vocabSize);
  assert.equal(hashed('tick'), fnv1a('tick') % 256);
  const groups = collisions(suiteWords(), hashed);
  for (const pair of [
    ['black', 'tick'],
    ['cyan', 'menu'],
    ['panda', 'row'],
    ['ok', 'send'],
    ['grape', 'lemon'],
  ])
    assert.ok(
      groups.some((g) => pair.every((w) => g.includes(w))),
      `${pair.join('/')} collide under hash-256: ${JSON.stringify(groups)}`
    );
  // Most collisions still leave the bag distinguishable (a colour adds a count to its template word's
  // bucket), but two pairs of suite instructions become the same input under hash-256.
  const same = (a: string, b: string, s: typeof spec) =>
    encodeInstruction(a, s).join(',') === encodeInstruction(b, s).join(',');
  assert.ok(same('Click the OK button.', 'Click the SEND button.', legacyPolicySpec));
  assert.ok(same('Enter "grape" and press Submit.', 'Enter "lemon" and press Submit.', legacyPolicySpec));
  assert.ok(!same('Click the OK button.', 'Click the SEND button.', spec));
  assert.ok(!same('Enter "grape" and press Submit.', 'Enter "lemon" and press Submit.', spec));
  assert.notDeepEqual(encodeInstruction('Tick black', spec), encodeInstruction('Tick tick', spec));
  assert.deepEqual(encodeInstruction('Tick black', legacyPolicySpec), encodeInstruction('tick tick', legacyPolicySpec));
});

test('out-of-vocabulary words fall into the hashed buckets after the word list', () => {
  const n = vocabularyWords(spec.textEncoding);
  for (const w of ['desktop', 'spreadsheet', 'libreoffice', 'xyzzy']) {
    const s = wordSlot(w, spec.textEncoding, spec.vocabSize);
    assert.ok(s >= n && s < spec.vocabSize, `${w} → ${s}`);
    assert.equal(s, n + (fnv1a(w) % (spec.vocabSize - n)));
  }
  const v = encodeInstruction('Open the spreadsheet', spec);
  assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-6);
  assert.throws(() => validateSpec({ ...spec, vocabSize: n }), /no out-of-vocabulary bucket/);
});
