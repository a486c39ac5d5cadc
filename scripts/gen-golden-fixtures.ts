/**
 * Golden fixtures of DART's algorithm core: inputs and what the TypeScript functions (algorithms/) give
 * for them, so the Python trainer's twin (python/dartflow_vlm/algorithms.py) can be held to the same
 * numbers (python/tests/test_algorithms_parity.py, 1e-6) and neither side drifts silently
 * (test/vlm-infra/golden-fixtures.test.ts regenerates and compares).
 *
 *   npx tsx scripts/gen-golden-fixtures.ts          writes test/fixtures/golden/algorithms.json
 *
 * The cases cover the edge cases of each formula: all-equal rewards, a one-sample group, zero-step
 * trajectories, ratios beyond both clips and the ±20 clamp, negative advantages hitting the dual clip,
 * TIS truncation and missing behaviour log-probs, KL clamps, entropy ties and tiny batches.
 * `tokenLoss` has no single TypeScript function (the embedded policy's action is one token): its
 * expected values are the per-token TypeScript functions aggregated seq-mean-token-mean, written out
 * here so the Python aggregation is checked against an independent implementation.
 */
import fs from 'node:fs';
import path from 'node:path';
import prettier from 'prettier';
import {
  computeLoss,
  createPrng,
  groupAdvantages,
  highEntropyMask,
  lowVarKl,
  ppoClippedSurrogate,
  selectionCount,
  stepAdvantages,
  truncatedIsWeight,
  type AdvantageOptions,
  type EntropySelectionOptions,
  type LossConfig,
  type LossOptions,
  type LossSample,
  type PpoOptions,
} from '../algorithms';

export const GOLDEN_FIXTURE_PATH = path.join(__dirname, '..', 'test', 'fixtures', 'golden', 'algorithms.json');

/** Rounded to 6 decimals: inputs are readable and exact in both languages' float parsing. */
const r6 = (x: number): number => Math.round(x * 1e6) / 1e6;

function advantageCases() {
  const cases: Array<{
    name: string;
    trajectories: Array<{ reward: number; numSteps: number }>;
    options: Partial<AdvantageOptions>;
  }> = [
    { name: 'mixed lengths, statistics over steps', trajectories: traj([1, 3], [0, 5], [0, 1], [1, 2]), options: {} },
    {
      name: 'mixed lengths, statistics over trajectories',
      trajectories: traj([1, 3], [0, 5], [0, 1], [1, 2]),
      options: { statisticsOver: 'trajectories' },
    },
    {
      name: 'all-equal rewards (0.7 does not sum exactly)',
      trajectories: traj([0.7, 2], [0.7, 3], [0.7, 1]),
      options: {},
    },
    { name: 'a single step sample: mean 0, std 1', trajectories: traj([1, 1]), options: {} },
    { name: 'a single failed step sample', trajectories: traj([0, 1]), options: {} },
    { name: 'one trajectory of several steps, all equal', trajectories: traj([1, 4]), options: {} },
    { name: 'zero-step trajectories do not count', trajectories: traj([1, 0], [0, 2], [1, 3]), options: {} },
    { name: 'only zero-step trajectories', trajectories: traj([1, 0], [0, 0]), options: {} },
    { name: 'fractional rewards', trajectories: traj([0.25, 2], [0.9, 1], [-0.5, 4], [0.1, 3]), options: {} },
    {
      name: 'no std normalisation (Dr.GRPO)',
      trajectories: traj([1, 2], [0, 1], [0.5, 3]),
      options: { normalizeByStd: false },
    },
    { name: 'epsilon 0.5', trajectories: traj([1, 1], [0, 1]), options: { epsilon: 0.5 } },
  ];
  return cases.map((c) => ({ ...c, expected: groupAdvantages(c.trajectories, c.options) }));
}

function traj(...pairs: Array<[number, number]>): Array<{ reward: number; numSteps: number }> {
  return pairs.map(([reward, numSteps]) => ({ reward, numSteps }));
}

function stepAdvantageCases() {
  const batch = [
    ['g1', 't1', 1],
    ['g1', 't1', 1],
    ['g1', 't2', 0],
    ['g2', 't3', 0.7],
    ['g1', 't2', 0],
    ['g2', 't4', 0.7],
    ['g3', 't5', 1],
    ['g1', 't6', 1],
    ['g4', 't7', 0],
    ['g4', 't8', 1],
    ['g4', 't8', 1],
    ['g4', 't9', 0],
  ] as const;
  const samples = batch.map(([groupId, trajectoryId, reward]) => ({ groupId, trajectoryId, reward }));
  return [
    {
      name: 'four groups: mixed, all-equal, a single sample, interleaved steps',
      samples,
      expected: Array.from(stepAdvantages(samples).advantages),
    },
  ];
}

function ppoCases() {
  const inputs: Array<{
    name: string;
    logp: number;
    logpOld: number;
    advantage: number;
    options?: Partial<PpoOptions>;
  }> = [
    { name: 'ratio 1, positive advantage', logp: -1.2, logpOld: -1.2, advantage: 0.8 },
    { name: 'inside the clip, negative advantage', logp: -1.0, logpOld: -1.05, advantage: -0.6 },
    { name: 'above 1+ε_high, A > 0: clipped', logp: -0.5, logpOld: -1.0, advantage: 1.3 },
    { name: 'below 1−ε_low, A < 0: clipped', logp: -2.0, logpOld: -1.0, advantage: -0.9 },
    { name: 'below 1−ε_low, A > 0: not clipped', logp: -2.0, logpOld: -1.0, advantage: 0.9 },
    { name: 'above 1+ε_high, A < 0: not clipped (L1 wins)', logp: -0.8, logpOld: -1.0, advantage: -1.1 },
    { name: 'ratio e^3 ≈ 20 > c, A < 0: dual clip', logp: -0.1, logpOld: -3.1, advantage: -0.7 },
    { name: 'ratio just under c = 10, A < 0: no dual clip', logp: Math.log(9.9), logpOld: 0, advantage: -0.7 },
    { name: 'log-ratio beyond +20, A < 0: clamp and dual clip', logp: -0.01, logpOld: -25, advantage: -0.2 },
    { name: 'log-ratio beyond +20, A > 0: clamp and clip', logp: -0.01, logpOld: -25, advantage: 0.2 },
    { name: 'log-ratio beyond −20, A > 0: clamp, no gradient', logp: -30, logpOld: -0.5, advantage: 0.4 },
    { name: 'log-ratio beyond −20, A < 0: clamp and clip', logp: -30, logpOld: -0.5, advantage: -0.4 },
    { name: 'zero advantage', logp: -0.3, logpOld: -0.9, advantage: 0 },
    { name: 'no clip (ablation)', logp: -0.5, logpOld: -1.0, advantage: 1.3, options: { useClip: false } },
    { name: 'no dual clip', logp: -0.1, logpOld: -3.1, advantage: -0.7, options: { dualClip: null } },
    {
      name: 'symmetric clip 0.2, dual clip 3',
      logp: -0.5,
      logpOld: -1.9,
      advantage: -0.5,
      options: { clipLow: 0.2, clipHigh: 0.2, dualClip: 3 },
    },
  ];
  return inputs.map((c) => ({
    ...c,
    options: c.options ?? {},
    expected: ppoClippedSurrogate(c.logp, c.logpOld, c.advantage, c.options),
  }));
}

function tisCases() {
  const inputs: Array<{ name: string; logpOld: number; logpBehaviour: number | null; cap: number }> = [
    { name: 'trainer less sure than the sampler: w < 1', logpOld: -1.5, logpBehaviour: -1.2, cap: 1 },
    { name: 'trainer surer: ratio > C, truncated to 1', logpOld: -0.4, logpBehaviour: -1.1, cap: 1 },
    { name: 'equal log-probs: w = 1, not truncated', logpOld: -0.7, logpBehaviour: -0.7, cap: 1 },
    { name: 'huge ratio (exp overflows): C', logpOld: 0, logpBehaviour: -1000, cap: 1 },
    { name: 'tiny ratio', logpOld: -40, logpBehaviour: -0.1, cap: 1 },
    { name: 'missing behaviour log-prob: 1', logpOld: -0.9, logpBehaviour: null, cap: 1 },
    { name: 'cap 0.5 truncates', logpOld: -0.9, logpBehaviour: -0.95, cap: 0.5 },
    { name: 'cap 0.5, missing behaviour: 0.5, truncated', logpOld: -0.9, logpBehaviour: null, cap: 0.5 },
    { name: 'cap 2 lets a ratio of 1.5 through', logpOld: Math.log(1.5), logpBehaviour: 0, cap: 2 },
  ];
  return inputs.map((c) => ({ ...c, expected: truncatedIsWeight(c.logpOld, c.logpBehaviour, c.cap) }));
}

function klCases() {
  const inputs: Array<{ name: string; logp: number; logpRef: number }> = [
    { name: 'equal: 0', logp: -1.1, logpRef: -1.1 },
    { name: 'reference more likely', logp: -2.0, logpRef: -1.2 },
    { name: 'reference less likely', logp: -0.3, logpRef: -1.7 },
    { name: 'estimate above 10: clamped, no gradient', logp: -4.0, logpRef: -0.5 },
    { name: 'log ratio below −20: clamped, no gradient', logp: -0.1, logpRef: -25 },
    { name: 'log ratio above +20: clamped', logp: -30, logpRef: -1 },
  ];
  return inputs.map((c) => ({ ...c, expected: lowVarKl(c.logp, c.logpRef) }));
}

function entropyMaskCases() {
  const rng = createPrng('golden-entropy');
  const random = Array.from({ length: 23 }, () => r6(rng.next() * 3));
  const inputs: Array<{
    name: string;
    entropies: number[];
    options: Partial<EntropySelectionOptions>;
    groupIds?: string[];
  }> = [
    { name: 'ten distinct, top 80 %', entropies: [0.5, 2.1, 0.1, 1.7, 0.9, 3.3, 0.05, 1.2, 2.8, 0.7], options: {} },
    { name: 'ties keep input order', entropies: [1, 1, 1, 1, 1, 0.5, 1], options: { topFraction: 0.5 } },
    { name: 'a single step: floor(0.8) = 0 → min 1', entropies: [0.4], options: {} },
    { name: 'a single step, bare formula', entropies: [0.4], options: { minSelected: 0 } },
    { name: 'two steps', entropies: [0.2, 0.9], options: {} },
    { name: 'keep all', entropies: [0.3, 0.1, 0.2], options: { topFraction: 1 } },
    { name: '23 random, top 80 %', entropies: random, options: {} },
    {
      name: 'per group',
      entropies: [0.1, 0.9, 0.5, 2.0, 0.3, 0.3, 1.1],
      options: { scope: 'group' },
      groupIds: ['a', 'a', 'b', 'a', 'b', 'c', 'b'],
    },
  ];
  const masks = inputs.map((c) => ({
    ...c,
    expected: Array.from(highEntropyMask(c.entropies, c.options, c.groupIds)),
  }));
  const counts = [
    [100, 0.29, 1],
    [10, 0.8, 1],
    [1, 0.8, 1],
    [1, 0.8, 0],
    [3, 0.5, 2],
    [384, 0.8, 1],
    [0, 0.8, 1],
  ].map(([n, topFraction, minSelected]) => ({
    n: n as number,
    topFraction: topFraction as number,
    minSelected: minSelected as number,
    expected: selectionCount(n as number, topFraction as number, minSelected as number),
  }));
  return { masks, counts };
}

/** One-token step samples: a batch where every branch of the loss is taken somewhere. */
function lossBatch(seed: string, n: number, opts: { missingBehaviour?: boolean; noRef?: boolean } = {}): LossSample[] {
  const rng = createPrng(seed);
  const u = (lo: number, hi: number): number => r6(lo + (hi - lo) * rng.next());
  return Array.from({ length: n }, (_, i) => {
    const logpOld = u(-4, -0.05);
    // Log-ratios from −2.5 to +3: some in the clip range, some beyond either clip and the dual clip.
    const logp = Math.min(-1e-3, r6(logpOld + u(-2.5, 3)));
    return {
      logp,
      logpOld,
      logpBehaviour: opts.missingBehaviour && i % 3 === 0 ? null : r6(logpOld + u(-1.2, 0.8)),
      logpRef: opts.noRef ? null : r6(logpOld + u(-1.5, 1.5)),
      advantage: u(-1.8, 1.8),
      entropy: u(0, 2.5),
    };
  });
}

function lossCases() {
  const inputs: Array<{ name: string; samples: LossSample[]; config: Partial<LossConfig>; options: LossOptions }> = [
    { name: 'DART defaults', samples: lossBatch('loss-a', 12), config: {}, options: {} },
    {
      name: 'missing behaviour log-probs',
      samples: lossBatch('loss-b', 9, { missingBehaviour: true }),
      config: {},
      options: {},
    },
    { name: 'no TIS', samples: lossBatch('loss-c', 10), config: { useTis: false }, options: {} },
    {
      name: 'no KL, no reference',
      samples: lossBatch('loss-d', 7, { noRef: true }),
      config: { useKl: false },
      options: {},
    },
    {
      name: 'no entropy selection, no clip',
      samples: lossBatch('loss-e', 8),
      config: { useEntropySelection: false, useClip: false },
      options: {},
    },
    {
      name: 'given mask and normalizer (a minibatch of a bigger batch), TIS cap 0.5, β 0.05',
      samples: lossBatch('loss-f', 6),
      config: { tisCap: 0.5, klBeta: 0.05 },
      options: { selectionMask: [1, 0, 1, 1, 0, 1], normalizer: 10 },
    },
    { name: 'a single sample', samples: lossBatch('loss-g', 1), config: {}, options: {} },
    {
      name: 'nothing selected',
      samples: lossBatch('loss-h', 3),
      config: {},
      options: { selectionMask: [0, 0, 0] },
    },
  ];
  return inputs.map((c) => {
    const out = computeLoss(c.samples, c.config, c.options);
    const { numSamples, numSelected, ...metrics } = out.metrics;
    return {
      ...c,
      expected: {
        loss: out.loss,
        gradLogp: Array.from(out.gradLogp),
        selectionMask: Array.from(out.selectionMask),
        metrics: { ...metrics, numSamples, numSelected },
      },
    };
  });
}

/**
 * Multi-token step samples: per-token TS functions, then DART's seq-mean-token-mean, total =
 * (1/D) Σ_i s_i · mean_t(w_it·L_it + β·KL_it). Gradients are per token: s_i/(D·T_i)·(w·dL + β·dKL).
 */
function tokenLossCase(
  seed: string,
  lengths: number[],
  selection: number[],
  config: { tisCap: number; klBeta: number }
) {
  const rng = createPrng(seed);
  const u = (lo: number, hi: number): number => r6(lo + (hi - lo) * rng.next());
  const T = Math.max(...lengths);
  const rows = lengths.map((len) => {
    const tok = Array.from({ length: T }, (_, t) => {
      const logpOld = u(-5, -0.01);
      return t < len
        ? {
            logp: Math.min(-1e-4, r6(logpOld + u(-2.5, 3))),
            logpOld,
            logpBehaviour: r6(logpOld + u(-1, 0.7)),
            logpRef: r6(logpOld + u(-1.5, 1.5)),
          }
        : { logp: 0, logpOld: 0, logpBehaviour: 0, logpRef: 0 }; // padding: masked out
    });
    return { tok, advantage: u(-1.5, 1.5), len };
  });
  const D = selection.reduce((a, b) => a + b, 0);
  let total = 0;
  const grad = rows.map(() => new Array<number>(T).fill(0));
  rows.forEach((row, i) => {
    let sum = 0;
    for (let t = 0; t < row.len; t++) {
      const x = row.tok[t]!;
      const ppo = ppoClippedSurrogate(x.logp, x.logpOld, row.advantage);
      const w = truncatedIsWeight(x.logpOld, x.logpBehaviour, config.tisCap).weight;
      const kl = lowVarKl(x.logp, x.logpRef);
      sum += w * ppo.loss + config.klBeta * kl.kl;
      grad[i]![t] = selection[i] ? (w * ppo.dLossDLogp + config.klBeta * kl.dKlDLogp) / (D * row.len) + 0 : 0;
    }
    if (selection[i]) total += sum / row.len;
  });
  const pick = (k: 'logp' | 'logpOld' | 'logpBehaviour' | 'logpRef') => rows.map((r) => r.tok.map((x) => x[k]));
  return {
    name: `${lengths.length} samples of ${lengths.join('/')} tokens`,
    logp: pick('logp'),
    logpOld: pick('logpOld'),
    logpBehaviour: pick('logpBehaviour'),
    logpRef: pick('logpRef'),
    mask: rows.map((r) => Array.from({ length: T }, (_, t) => (t < r.len ? 1 : 0))),
    advantages: rows.map((r) => r.advantage),
    selection,
    config,
    expected: { loss: D === 0 ? 0 : total / D, gradLogp: grad },
  };
}

export function goldenFixtures() {
  return {
    about:
      'Generated by scripts/gen-golden-fixtures.ts from algorithms/*.ts; do not edit. Python must match to 1e-6 ' +
      '(python/tests/test_algorithms_parity.py).',
    advantages: advantageCases(),
    stepAdvantages: stepAdvantageCases(),
    ppo: ppoCases(),
    tis: tisCases(),
    kl: klCases(),
    entropyMask: entropyMaskCases(),
    loss: lossCases(),
    tokenLoss: [
      tokenLossCase('tok-a', [5, 3, 7, 1], [1, 1, 0, 1], { tisCap: 1, klBeta: 0.1 }),
      tokenLossCase('tok-b', [4, 6, 2], [1, 1, 1], { tisCap: 0.5, klBeta: 0 }),
    ],
  };
}

/** The fixture file's text, formatted as the repository's prettier config says (format:check stays clean). */
export async function renderGoldenFixtures(): Promise<string> {
  const options = await prettier.resolveConfig(GOLDEN_FIXTURE_PATH);
  return prettier.format(JSON.stringify(goldenFixtures()), { ...options, filepath: GOLDEN_FIXTURE_PATH });
}

if (require.main === module) {
  void renderGoldenFixtures().then((text) => {
    fs.mkdirSync(path.dirname(GOLDEN_FIXTURE_PATH), { recursive: true });
    fs.writeFileSync(GOLDEN_FIXTURE_PATH, text);
    console.log(`wrote ${path.relative(process.cwd(), GOLDEN_FIXTURE_PATH)}`);
  });
}
