/**
 * The episode heartbeat gate: short activities send no heartbeat, a longer one sends its latest held-back
 * details when the quiet period ends and every heartbeat after that, one blocked in a long env operation is
 * kept alive, and a finished one sends nothing.
 */
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { heartbeatGate } from '../../activities/env/heartbeat-gate';

function setup(timeoutMs: number | undefined) {
  mock.timers.enable({ apis: ['setTimeout'] });
  const start = 1_000;
  let clock = start;
  const sent: number[] = [];
  /** When each heartbeat was sent, in ms since the activity started. */
  const sentAt: number[] = [];
  const gate = heartbeatGate<number>(
    (d) => {
      sent.push(d);
      sentAt.push(clock - start);
    },
    timeoutMs,
    () => clock
  );
  // In steps of at most a second, so timers fire with the clock at (about) their due time.
  const advance = (ms: number) => {
    for (let left = ms; left > 0; left -= 1_000) {
      const dt = Math.min(1_000, left);
      clock += dt;
      mock.timers.tick(dt);
    }
  };
  return { gate, sent, sentAt, advance };
}

test('an episode that ends within the quiet period sends no heartbeat', (t) => {
  t.after(() => mock.timers.reset());
  const { gate, sent, advance } = setup(60_000); // quiet period 10 s
  gate.heartbeat(0);
  advance(3_000);
  gate.heartbeat(1);
  advance(3_000);
  gate.dispose();
  advance(60_000);
  assert.deepEqual(sent, []);
});

test('a longer episode sends its latest details when the quiet period ends, then every heartbeat', (t) => {
  t.after(() => mock.timers.reset());
  const { gate, sent, advance } = setup(60_000);
  gate.heartbeat(0);
  advance(4_000);
  gate.heartbeat(1);
  advance(5_999);
  assert.deepEqual(sent, [], 'nothing inside the quiet period');
  advance(1);
  assert.deepEqual(sent, [1], 'the latest held-back heartbeat at 10 s, with no step in between');
  gate.heartbeat(2);
  advance(15_000);
  gate.heartbeat(3);
  assert.deepEqual(sent, [1, 2, 3]);
  gate.dispose();
  gate.heartbeat(4);
  advance(120_000);
  assert.deepEqual(sent, [1, 2, 3], 'nothing after the activity ended');
});

test('an activity blocked in a long env operation is kept alive with its latest details', (t) => {
  t.after(() => mock.timers.reset());
  const { gate, sent, sentAt, advance } = setup(60_000); // quiet 10 s; keep-alive after 20 s without a send
  gate.heartbeat(0); // then a 5-minute reset: no step heartbeat at all
  advance(300_000);
  assert.deepEqual(
    sentAt.map((ms) => ms / 1000),
    [10, 30, 50, 70, 90, 110, 130, 150, 170, 190, 210, 230, 250, 270, 290]
  );
  assert.ok(sent.every((d) => d === 0));
  // Steps heartbeat on their own every 2 s: no keep-alive on top of them.
  const beforeSteps = sent.length;
  for (let s = 1; s <= 10; s++) {
    gate.heartbeat(s);
    advance(2_000);
  }
  assert.deepEqual(sent.slice(beforeSteps), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  // A 45 s evaluation after the last step (sent at 318 s): its details re-sent at 338 s and 358 s.
  const beforeEval = sent.length;
  advance(45_000);
  assert.deepEqual(sent.slice(beforeEval), [10, 10]);
  assert.deepEqual(
    sentAt.slice(beforeEval).map((ms) => ms / 1000),
    [338, 358]
  );
  gate.dispose();
  advance(600_000);
  assert.equal(sent.length, beforeEval + 2, 'nothing after the activity ended');
});

test('a step after the quiet period sends at once; no heartbeat timeout means no gate', (t) => {
  t.after(() => mock.timers.reset());
  const late = setup(60_000);
  late.advance(12_000);
  late.gate.heartbeat(7);
  assert.deepEqual(late.sent, [7]);
  late.gate.dispose();
  mock.timers.reset();
  for (const timeout of [undefined, 0]) {
    const ungated = setup(timeout);
    ungated.gate.heartbeat(0);
    ungated.advance(600_000);
    assert.deepEqual(ungated.sent, [0], `timeout ${timeout}: passed straight through, no keep-alive`);
    ungated.gate.dispose();
    mock.timers.reset();
  }
});
