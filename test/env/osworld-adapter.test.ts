/**
 * The `osworld` env against a loopback GUI-Docker-Env + VM fake and a fake sidecar (no Python): leasing
 * with quota check and fallback over env servers, canonical actions as pyautogui code, DART's failure
 * modes as typed errors, every failed episode recorded with reward null, and every leased VM released.
 * The real sidecar (OSWorld's own evaluators) is exercised in osworld-adapter-sidecar.test.ts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CancelledFailure } from '@temporalio/common';
import { runEpisodeCore } from '../../activities/env/run-episode';
import type { PolicyFactory } from '../../activities/env/policy';
import { renderPyautogui } from '../../actions/pyautogui';
import { EnvTimeoutError, EnvUnavailableError } from '../../envs/errors';
import {
  EnvServerQuotaError,
  OsworldEnvPool,
  OsworldEvaluatorError,
  PYAUTOGUI_PREFIX,
  ScreenshotNotImageError,
  type OsworldEnvOptions,
} from '../../envs/osworld';
import { createEnvPool, envPoolConfigFromEnv } from '../../envs/pool-factory';
import type { CanonicalAction } from '../../schemas/actions';
import { TrajectoryManifestSchema } from '../../schemas/records';
import type { ObjectStore } from '../../storage/object-store';
import { parseTaskSpec } from '../../tasks';
import { throwawayStore } from './helpers';
import { FakeEnvServer, FakeSidecar } from './osworld-adapter-fake';

const TOKEN = 'dart';
const TASK = parseTaskSpec(
  {
    id: 'os.0b1c2d3e',
    snapshot: 'os',
    instruction: 'Open a terminal.',
    source: 'test',
    config: [{ type: 'launch', parameters: { command: ['gnome-terminal'] } }],
    evaluator: {
      func: 'exact_match',
      result: { type: 'rule', rules: 'a' },
      expected: { type: 'rule', rules: { expected: 'a' } },
    },
  },
  'osworld-adapter.test.ts'
);

let store: ObjectStore;
let drop: () => Promise<void>;
let sidecar: FakeSidecar;
const servers: FakeEnvServer[] = [];

before(async () => {
  ({ store, drop } = await throwawayStore('test-osworld-'));
  sidecar = await new FakeSidecar().start();
});
after(async () => {
  for (const s of servers) s.close();
  sidecar.close();
  await drop();
});

async function envServer(o: Partial<ConstructorParameters<typeof FakeEnvServer>[0]> = {}): Promise<FakeEnvServer> {
  const s = await new FakeEnvServer({ token: TOKEN, limit: 2, ...o }).start();
  servers.push(s);
  return s;
}

/** A port nothing listens on: an env server that refuses connections. */
async function deadUrl(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

const fast = (urls: string[], over: Partial<OsworldEnvOptions> = {}): OsworldEnvOptions => ({
  envServerUrls: urls,
  token: TOKEN,
  sidecarUrl: sidecar.url,
  pauseMs: 0,
  settleMs: 0,
  initAttempts: 1,
  initRetryDelayMs: 0,
  vmTries: 2,
  vmRetryDelayMs: 10,
  // Generous: on a loaded 2-core CI machine a healthy fake can take far longer than a real VM's
  // budget to answer; only the hanging-VM test shortens them (HANG_TIMEOUTS).
  timeouts: { screenshotMs: 10_000, executeMs: 10_000, startMs: 10_000 },
  ...over,
});

/** Short budgets for the one test whose VM never answers (the timeout is what it checks). */
const HANG_TIMEOUTS = { timeouts: { screenshotMs: 300, executeMs: 300, startMs: 2_000 } };

/** A policy that plays a fixed list of actions. */
const scripted =
  (actions: CanonicalAction[]): PolicyFactory =>
  () => ({
    act: async (obs) => ({
      action: actions[obs.step] ?? { type: 'finished' },
      actionText: JSON.stringify(actions[obs.step] ?? 'finished'),
      logProb: 0,
      entropy: 0,
      policyVersion: 0,
    }),
  });

async function episode(pool: OsworldEnvPool, actions: CanonicalAction[], signal?: AbortSignal) {
  const trajectoryId = `t-${Math.random().toString(36).slice(2, 10)}`;
  const run = runEpisodeCore(
    { pool, store, policies: { scripted: scripted(actions) } },
    { campaignId: 'osworld-test', groupId: 'g', trajectoryId, task: TASK, seed: 1, policy: { kind: 'scripted' } },
    { heartbeat: () => undefined, attempt: 1, ...(signal ? { signal } : {}) }
  );
  const manifest = async () =>
    store.getJson(`campaigns/osworld-test/trajectories/${trajectoryId}/manifest.json`, TrajectoryManifestSchema);
  return { run, manifest };
}

/** The episode failed as infrastructure: typed error of `type`, manifest reward null, no VM left leased. */
async function assertInfraFailure(
  e: { run: Promise<unknown>; manifest: () => Promise<{ reward: number | null; status: string; error?: string }> },
  type: string,
  message: RegExp,
  server: FakeEnvServer
) {
  await assert.rejects(e.run, (err: Error & { type?: string }) => {
    assert.equal(err.type, type, err.message);
    assert.match(err.message, message);
    return true;
  });
  const m = await e.manifest();
  assert.equal(m.reward, null, 'an infrastructure failure is never a reward');
  assert.equal(m.status, 'env_error');
  assert.equal(server.current, 0, 'every leased VM was released');
  assert.ok(server.deleted.length >= 1, 'the fake saw DELETE /emulators/{id}');
}

test('canonical actions arrive at the VM as pyautogui code; the VM is released after the episode', async () => {
  const server = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url]) });
  const actions: CanonicalAction[] = [
    { type: 'click', x: 0.5, y: 0.25 },
    { type: 'type', text: 'ls -la\n' },
    { type: 'hotkey', keys: ['ctrl', 'c'] },
    { type: 'scroll', direction: 'down', x: 0.1, y: 0.2 },
    { type: 'wait' },
    { type: 'drag', x: 0, y: 0, x2: 1, y2: 1 },
  ];
  try {
    const e = await episode(pool, actions);
    const res = await e.run;
    assert.equal(res.status, 'ok');
    assert.equal(res.reward, 1);
    const vm = [...server.vms.values()][0];
    assert.equal(vm, undefined, 'the VM is gone from the env server');
    assert.deepEqual(server.deleted, ['emu-0']);
    assert.equal(server.current, 0);
    assert.ok(
      server.requests.indexOf('GET /tokens') < server.requests.indexOf('POST /start_emulator'),
      'quota checked first'
    );
    assert.deepEqual(sidecar.evaluations.at(-1)?.lastAction, 'DONE');
  } finally {
    await pool.close();
  }
  // What the VM was sent, by the code OSWorld's PythonController would run.
  const server2 = await envServer();
  const pool2 = new OsworldEnvPool({ slots: 1, ...fast([server2.url]) });
  try {
    const env = await pool2.acquire();
    await env.reset(TASK, 1);
    const vm = [...server2.vms.values()][0]!;
    for (const a of actions) await env.step(a);
    assert.deepEqual(
      vm.executed.map((c) => {
        assert.deepEqual(c.slice(0, 2), ['python', '-c']);
        assert.ok(c[2]!.startsWith(PYAUTOGUI_PREFIX));
        return c[2]!.slice(PYAUTOGUI_PREFIX.length);
      }),
      [
        "pyautogui.click(960, 270, button='left')",
        "pyautogui.write('ls -la', interval=0.1)\npyautogui.press('enter')",
        "pyautogui.hotkey('ctrl', 'c')",
        'pyautogui.scroll(-5, x=192, y=216)',
        // wait: nothing executed (the env sleeps)
        'pyautogui.moveTo(0, 0)\npyautogui.dragTo(1920, 1080, duration=1.0)',
      ]
    );
    assert.equal(renderPyautogui({ type: 'wait' }, { width: 1920, height: 1080 }), 'WAIT');
    assert.deepEqual(await env.step({ type: 'call_user' }), { done: true, actionOk: true });
    assert.equal(vm.executed.length, 5, 'FAIL is not executed');
    await pool2.release(env);
    assert.deepEqual(server2.deleted, ['emu-0']);
  } finally {
    await pool2.close();
  }
});

test('quota: a full server is skipped (GET /tokens), a 429 falls back to the next, all full is a typed error', async () => {
  const full = await envServer({ limit: 0 });
  const racing = await envServer({ startStatus: 429 }); // /tokens says free, start_emulator says 429
  const free = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([full.url, racing.url, free.url]) });
  try {
    const env = await pool.acquire();
    await env.reset(TASK, 1);
    assert.ok(!full.requests.includes('POST /start_emulator'), 'a server whose quota is used up is not asked to start');
    assert.ok(racing.requests.includes('POST /start_emulator'));
    assert.equal(free.current, 1);
    await pool.release(env);
    assert.equal(free.current, 0);
  } finally {
    await pool.close();
  }
  const allFull = new OsworldEnvPool({ slots: 1, ...fast([full.url, racing.url]) });
  try {
    const e = await episode(allFull, []);
    await assert.rejects(e.run, (err: Error & { type?: string }) => {
      assert.equal(err.type, 'EnvServerQuotaError');
      assert.ok(err.message.includes(full.url) && err.message.includes(racing.url), err.message);
      assert.match(err.message, /quota used up \(0\/0\)/);
      return true;
    });
    assert.equal((await e.manifest()).reward, null);
  } finally {
    await allFull.close();
  }
  const env = new OsworldEnvPool({ slots: 1, ...fast([full.url]) });
  await assert.rejects((await env.acquire()).reset(TASK, 1), EnvServerQuotaError);
  await env.close();
});

test('an env server that refuses (connection refused, HTTP 500) falls back to the next; none left is typed', async () => {
  const dead = await deadUrl();
  const refusing = await envServer({ startStatus: 500 });
  const good = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([dead, refusing.url, good.url]) });
  try {
    const res = await (await episode(pool, [{ type: 'click', x: 0.1, y: 0.1 }])).run;
    assert.equal(res.status, 'ok');
    assert.deepEqual(good.deleted, ['emu-0']);
  } finally {
    await pool.close();
  }
  const none = new OsworldEnvPool({ slots: 1, ...fast([dead, refusing.url]) });
  try {
    const env = await none.acquire();
    await assert.rejects(env.reset(TASK, 1), (err: Error) => {
      assert.ok(err instanceof EnvUnavailableError && !(err instanceof EnvServerQuotaError));
      assert.ok(err.message.includes(dead) && err.message.includes(`${refusing.url}: HTTP 500`), err.message);
      return true;
    });
  } finally {
    await none.close();
  }
});

test('a VM that never answers: timeout, infrastructure failure, each attempt’s VM released', async () => {
  const server = await envServer({ vmMode: 'hang' });
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url], { initAttempts: 2, ...HANG_TIMEOUTS }) });
  try {
    await assertInfraFailure(
      await episode(pool, []),
      'EnvTimeoutError',
      /VM http:\/\/127\.0\.0\.1:\d+ .*GET \/screenshot did not answer within 300 ms/,
      server
    );
    assert.deepEqual(server.deleted, ['emu-0', 'emu-1'], 'DART-style init retry, VM released between attempts');
  } finally {
    await pool.close();
  }
  const env = new OsworldEnvPool({ slots: 1, ...fast([server.url], HANG_TIMEOUTS) });
  await assert.rejects((await env.acquire()).reset(TASK, 1), EnvTimeoutError);
  await env.close();
});

test('a screenshot that is not an image: typed error naming the VM, VM released', async () => {
  const server = await envServer({ vmMode: 'not-image' });
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url]) });
  try {
    await assertInfraFailure(
      await episode(pool, []),
      'ScreenshotNotImageError',
      /VM http:\/\/127\.0\.0\.1:\d+ \(emulator emu-0\): GET \/screenshot returned 28 bytes that are not a PNG image/,
      server
    );
    const env = await pool.acquire();
    await assert.rejects(env.reset(TASK, 1), ScreenshotNotImageError);
    await pool.release(env);
  } finally {
    await pool.close();
  }
});

test('a VM that dies mid-episode: EnvCrashedError, reward null, VM released', async () => {
  const server = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url]) });
  try {
    const e = await episode(pool, [
      { type: 'click', x: 0.1, y: 0.1 },
      { type: 'click', x: 0.2, y: 0.2 },
      { type: 'click', x: 0.3, y: 0.3 },
    ]);
    // Kill the VM once it has run the first action (the screenshot after it finds it gone).
    const watch = setInterval(() => {
      const vm = [...server.vms.values()][0];
      if (vm) vm.dieAfterExecutes = 1;
    }, 1);
    try {
      await assertInfraFailure(e, 'EnvCrashedError', /VM http:\/\/127\.0\.0\.1:\d+ \(emulator emu-0\) is gone/, server);
    } finally {
      clearInterval(watch);
    }
    assert.equal(pool.stats().replaced, 1, 'the broken env was replaced');
  } finally {
    await pool.close();
  }
});

test('an evaluator that raises: typed error naming task and field, never reward 0, VM released', async () => {
  const server = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url]) });
  sidecar.evaluateAnswer = {
    status: 500,
    body: {
      error: {
        type: 'EvaluatorError',
        message: 'metric exact_match raised KeyError: expected',
        field: 'evaluator.func',
      },
    },
  };
  try {
    await assertInfraFailure(
      await episode(pool, [{ type: 'finished' }]),
      'OsworldEvaluatorError',
      /task os\.0b1c2d3e, field evaluator\.func \(sidecar http:\/\/127\.0\.0\.1:\d+, POST \/v1\/evaluate\): metric exact_match raised KeyError/,
      server
    );
    assert.ok(new OsworldEvaluatorError('x').retryable);
  } finally {
    sidecar.evaluateAnswer = { status: 200, body: { reward: 1 } };
    await pool.close();
  }
});

test('a cancelled episode releases its VM', async () => {
  const server = await envServer();
  const pool = new OsworldEnvPool({ slots: 1, ...fast([server.url], { pauseMs: 50 }) });
  const ac = new AbortController();
  try {
    const e = await episode(
      pool,
      Array.from({ length: 20 }, () => ({ type: 'click', x: 0.5, y: 0.5 }) as const),
      ac.signal
    );
    setTimeout(() => ac.abort(new CancelledFailure('test cancel')), 150);
    await assert.rejects(e.run, CancelledFailure);
    assert.equal((await e.manifest()).reward, null);
    assert.equal(server.current, 0);
    assert.deepEqual(server.deleted, ['emu-0']);
  } finally {
    await pool.close();
  }
});

test('DARTFLOW_ENV_KIND=osworld builds the pool from DARTFLOW_OSWORLD_* and names a missing variable', async () => {
  const env = {
    DARTFLOW_ENV_KIND: 'osworld',
    DARTFLOW_ENV_SLOTS: '3',
    DARTFLOW_OSWORLD_ENV_SERVERS: 'http://10.0.0.1:50003, http://10.0.0.2:50003',
    DARTFLOW_OSWORLD_TOKEN: 'dart',
    DARTFLOW_OSWORLD_SIDECAR_URL: 'http://127.0.0.1:50010',
  };
  const cfg = envPoolConfigFromEnv(env);
  assert.deepEqual(cfg, {
    kind: 'osworld',
    slots: 3,
    envServerUrls: ['http://10.0.0.1:50003', 'http://10.0.0.2:50003'],
    token: 'dart',
    sidecarUrl: 'http://127.0.0.1:50010',
  });
  const pool = createEnvPool(cfg);
  assert.equal(pool.kind, 'osworld');
  assert.equal(pool.slots, 3);
  await pool.close();
  assert.throws(
    () => envPoolConfigFromEnv({ ...env, DARTFLOW_OSWORLD_TOKEN: '' }),
    /DARTFLOW_OSWORLD_TOKEN must be set/
  );
});
