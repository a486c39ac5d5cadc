import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bcScaleSeries, bcScaleSpec, parseBcGrid, wholeNumber, type BcScaleRow } from '../../bench/lib/bc-scale';
import { defaultPolicySpec, maxContextPolicySpec, wordQueryPolicySpec } from '../../policy/spec';

const row = (demos: number, epochs: number, seed: number, perFamily: Record<string, number>): BcScaleRow => ({
  demos,
  epochs,
  seed,
  demosCloned: demos,
  greedy: 0,
  perFamily,
  minutes: 1,
});

describe('behaviour-cloning scale bench (bench/lib/bc-scale.ts)', () => {
  it('parses a grid of <demos>x<epochs> and names a bad entry with the fix', () => {
    assert.deepEqual(parseBcGrid('256x8, 2048x16'), [
      { demos: 256, epochs: 8 },
      { demos: 2048, epochs: 16 },
    ]);
    assert.throws(() => parseBcGrid('256x8,2048'), /--grid entry "2048": write <demos>x<epochs>/);
    assert.throws(() => parseBcGrid('0x8'), /--grid entry "0x8"/);
    assert.equal(wholeNumber('--eval', '32', 1), 32);
    assert.throws(() => wholeNumber('--eval', 'x', 1), /--eval: "x" is not an integer ≥ 1/);
    assert.throws(() => wholeNumber('--seeds', '-1', 0), /--seeds: "-1" is not an integer ≥ 0/);
    assert.equal(bcScaleSpec('default'), defaultPolicySpec);
    assert.equal(bcScaleSpec('max-context'), maxContextPolicySpec);
    assert.equal(bcScaleSpec('word-query'), wordQueryPolicySpec);
    assert.throws(() => bcScaleSpec('wide'), /--spec: "wide" is not one of default, max-context, word-query/);
  });

  it('draws one line per family and epochs, demos ascending, seeds averaged, in percent', () => {
    const rows = [
      row(1024, 8, 1, { a: 0.5, b: 1 }),
      row(256, 8, 1, { a: 0.25, b: 0.5 }),
      row(1024, 8, 2, { a: 0.75, b: 1 }),
      row(2048, 16, 1, { a: 1, b: 0.5 }),
    ];
    const series = bcScaleSeries(rows, ['a', 'b']);
    assert.deepEqual(
      series.map((s) => [s.name, s.points]),
      [
        [
          'a (8 epochs)',
          [
            [256, 25],
            [1024, 62.5],
          ],
        ],
        [
          'b (8 epochs)',
          [
            [256, 50],
            [1024, 100],
          ],
        ],
        ['a (16 epochs)', [[2048, 100]]],
        ['b (16 epochs)', [[2048, 50]]],
      ]
    );
    // One epochs value: the family alone names its line.
    assert.deepEqual(
      bcScaleSeries([row(256, 8, 1, { a: 0.5 })], ['a']).map((s) => s.name),
      ['a']
    );
  });
});
