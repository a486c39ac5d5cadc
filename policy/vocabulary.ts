/**
 * The instruction vocabulary of the embedded policy: a frozen word list, so every word the task pages
 * can put into an instruction has its own input slot (no hash collisions), and everything else falls
 * into a few hashed out-of-vocabulary buckets after it.
 *
 * Why frozen and not derived from the pages at run time: a word's slot is part of what a checkpoint
 * learned. A list built from the pages would renumber slots whenever a page gains a word and silently
 * scramble the text input of every existing checkpoint; a new list is a new `textEncoding` value (and so
 * a new spec hash, which refuses old checkpoints). test/policy/vocabulary.test.ts runs every page's
 * instruction generator and fails when a page produces a word this list lacks.
 */

/** `words-v1`: every word of tasks/pages/*.html instructions (templates, colours, shapes, labels, words). */
export const WORDS_V1: readonly string[] = Object.freeze([
  // Template words of the eight families' instructions.
  'click',
  'the',
  'box',
  'button',
  'in',
  'text',
  'field',
  'enter',
  'and',
  'press',
  'submit',
  'open',
  'menu',
  'choose',
  'scroll',
  'to',
  'row',
  'it',
  'tick',
  'then',
  // runtime.js D.COLORS (click-colour, focus-field, tick-checkboxes, pick-menu, scroll-click).
  'red',
  'green',
  'blue',
  'yellow',
  'orange',
  'purple',
  'cyan',
  'black',
  // click-shape.
  'circle',
  'square',
  'triangle',
  'diamond',
  'cross',
  // click-target labels.
  'ok',
  'go',
  'yes',
  'next',
  'send',
  'start',
  // enter-text WORDS.
  'kiwi',
  'lemon',
  'apple',
  'mango',
  'pear',
  'plum',
  'fig',
  'grape',
  'melon',
  'peach',
  'cherry',
  'olive',
  'tiger',
  'otter',
  'zebra',
  'panda',
  'koala',
  'eagle',
  'river',
  'cloud',
  'stone',
  'maple',
  'cedar',
  'amber',
]);

/** The encodings a PolicySpec may name; the value is part of the spec hash. */
export const TEXT_ENCODINGS = ['hash', 'words-v1'] as const;
export type TextEncoding = (typeof TEXT_ENCODINGS)[number];

const LISTS: Record<Exclude<TextEncoding, 'hash'>, readonly string[]> = { 'words-v1': WORDS_V1 };

/** Word → slot for each list (built once). */
const INDEX = new Map<TextEncoding, Map<string, number>>(
  Object.entries(LISTS).map(([k, words]) => [k as TextEncoding, new Map(words.map((w, i) => [w, i]))])
);

/** Number of named words of an encoding (0 for `hash`: every slot is a hash bucket). */
export function vocabularyWords(encoding: TextEncoding): number {
  return encoding === 'hash' ? 0 : LISTS[encoding].length;
}

/** FNV-1a 32-bit over the UTF-8 bytes: stable across runs, machines and Node versions. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(s)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The input slot of one (lower-case) word among `size` slots: its own slot when the list has it, else
 * one of the `size − words` out-of-vocabulary buckets after the list (hashed, so unknown words of other
 * task sources still give some signal). `hash` hashes every word into all `size` slots (the v1 encoding).
 */
export function wordSlot(word: string, encoding: TextEncoding, size: number): number {
  if (encoding === 'hash') return fnv1a(word) % size;
  const known = INDEX.get(encoding)!.get(word);
  if (known !== undefined) return known;
  const n = LISTS[encoding].length;
  return n + (fnv1a(word) % (size - n));
}
