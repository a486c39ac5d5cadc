/** The whole-suite goal (bench/lib/suite-goals.ts): ≥ 90 % on every tier-1 family, ≥ 80 % on every tier-2 one. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EvalPoint } from '../../schemas/campaign';
import { familyGoals, meetsGoals, restrictFamilies, suiteGoalReport } from '../../bench/lib/suite-goals';

const goals = familyGoals({ tier1: ['a', 'b'], tier2: ['c'] });
const point = (version: number, minutes: number, perFamily: Record<string, number>): EvalPoint => ({
  version,
  successRate: Object.values(perFamily).reduce((x, y) => x + y, 0) / Object.keys(perFamily).length,
  episodes: 32 * Object.keys(perFamily).length,
  atEpisodes: version * 100,
  atMs: minutes * 60_000,
  perFamily,
  sampledPerFamily: Object.fromEntries(Object.entries(perFamily).map(([f, v]) => [f, v / 2])),
  sampledSuccessRate: 0,
  sampledEpisodes: 8 * Object.keys(perFamily).length,
});

test('tier goals: a tier-2 family needs 80 %, a tier-1 family 90 %; a missing family never meets its goal', () => {
  assert.deepEqual(goals, {
    a: { tier: 'tier1', goal: 0.9 },
    b: { tier: 'tier1', goal: 0.9 },
    c: { tier: 'tier2', goal: 0.8 },
  });
  assert.ok(meetsGoals(point(1, 1, { a: 0.9, b: 0.95, c: 0.8 }), goals));
  assert.ok(!meetsGoals(point(1, 1, { a: 0.89, b: 0.95, c: 0.99 }), goals), 'tier-1 at 89 %');
  assert.ok(!meetsGoals(point(1, 1, { a: 0.9, b: 0.9 }), goals), 'no point for c');
  assert.throws(() => familyGoals({ tier1: ['a'], tier2: ['a'] }), /family a is in both tiers/);
});

test('the report: first evaluation meeting every goal within the window, per family first reach and final', () => {
  const evals = [
    point(1, 1, { a: 0.5, b: 0.2, c: 0.0 }),
    point(11, 20, { a: 0.95, b: 0.85, c: 0.85 }),
    point(21, 40, { a: 0.92, b: 0.91, c: 0.7 }),
    point(31, 55, { a: 0.94, b: 0.93, c: 0.81 }),
    point(41, 70, { a: 1, b: 1, c: 1 }),
  ];
  const r = suiteGoalReport(evals, goals, { windowMs: 60 * 60_000, bcStart: evals[0]!, final: evals[3]! });
  assert.equal(r.met, true);
  assert.deepEqual(r.firstAllMet, { version: 31, atMinutes: 55, atEpisodes: 3100 });
  assert.deepEqual(r.perFamily.c!.firstReached, { version: 11, atMinutes: 20, atEpisodes: 1100 });
  assert.equal(r.perFamily.b!.firstReached?.version, 21);
  assert.equal(r.perFamily.c!.bcStart, 0);
  assert.equal(r.perFamily.c!.final, 0.81);
  assert.equal(r.perFamily.c!.finalSampled, 0.405);
  assert.equal(r.perFamily.a!.best, 0.95, 'the 70-minute point is outside the window');
  assert.deepEqual(r.finalMetCount, { tier1: { met: 2, of: 2 }, tier2: { met: 1, of: 1 } });
  // The same evaluations with a 50-minute window: never all at once.
  const short = suiteGoalReport(evals, goals, { windowMs: 50 * 60_000 });
  assert.equal(short.met, false);
  assert.equal(short.firstAllMet, null);
});

test("a tier's view of an evaluation: its families only, the overall rates their mean", () => {
  const e = point(5, 3, { a: 1, b: 0.5, c: 0 });
  const t1 = restrictFamilies(e, ['a', 'b']);
  assert.deepEqual(t1.perFamily, { a: 1, b: 0.5 });
  assert.equal(t1.successRate, 0.75);
  assert.deepEqual(t1.sampledPerFamily, { a: 0.5, b: 0.25 });
  assert.equal(t1.sampledSuccessRate, 0.375);
  assert.equal(t1.episodes, 64);
  assert.equal(t1.sampledEpisodes, 16);
});
