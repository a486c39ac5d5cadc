/**
 * The episode heartbeat gate: short activities send no heartbeat, a longer one sends its latest held-back
 * details when the quiet period ends and every heartbeat after that, and a finished one sends nothing.
 */
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { heartbeatGate } from '../../activities/env/heartbeat-gate';

function setup(timeoutMs: number | undefined) {
  mock.timers.enable({ apis: ['setTimeout'] });
  let clock = 1_000;
  const sent: number[] = [];
  const gate = heartbeatGate<number>(
    (d) => sent.push(d),
    timeoutMs,
    () => clock
  );
  const advance = (ms: number) => {
    clock += ms;
    mock.timers.tick(ms);
  };
  return { gate, sent, advance };
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
  advance(30_000);
  gate.heartbeat(3);
  assert.deepEqual(sent, [1, 2, 3]);
  gate.dispose();
  gate.heartbeat(4);
  assert.deepEqual(sent, [1, 2, 3], 'nothing after the activity ended');
});

test('a step after the quiet period sends at once; no heartbeat timeout means no gate', (t) => {
  t.after(() => mock.timers.reset());
  const late = setup(60_000);
  late.advance(12_000);
  late.gate.heartbeat(7);
  assert.deepEqual(late.sent, [7]);
  late.gate.dispose();
  mock.timers.reset();
  const ungated = setup(undefined);
  ungated.gate.heartbeat(0);
  assert.deepEqual(ungated.sent, [0]);
  ungated.gate.dispose();
});
