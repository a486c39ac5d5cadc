/**
 * Task pages run without network: a page that tries to reach an external host, another loopback port
 * (a real HTTP server started here), a WebSocket, an image or an iframe gets nothing through, and the
 * server sees no request at all; normal task pages still work. The same probe with allowNetwork on does
 * reach the server, so the test can fail.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createOraclePolicy } from '../../activities/env/policies';
import type { BrowserEnv } from '../../envs/browser/browser-env';
import { BrowserEnvPool } from '../../envs/browser/pool';
import type { GuiEnv } from '../../envs/types';
import { loadTask, type TaskSpec } from '../../tasks';
import { playEpisode } from '../env/helpers';

let server: http.Server;
let port: number;
const seen: string[] = [];

before(async () => {
  server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.setHeader('access-control-allow-origin', '*');
    res.end('reachable');
  });
  server.on('upgrade', (req, socket) => {
    seen.push(`UPGRADE ${req.url}`);
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});

const pageOf = (env: BrowserEnv): Page => (env as unknown as { page: Page }).page;

/**
 * What a hostile task page could try: fetch, image, iframe, WebSocket, sendBeacon. Plain JS text: tsx's
 * helpers (__name) do not exist in the page.
 */
const PROBE = `async (p) => {
  const out = [];
  const tryFetch = async (label, url) => {
    try {
      const r = await fetch(url);
      out.push(label + ':' + (await r.text()));
    } catch {
      out.push(label + ':blocked');
    }
  };
  await tryFetch('external', 'http://example.com/');
  await tryFetch('external-ip', 'http://93.184.216.34/');
  await tryFetch('loopback', 'http://127.0.0.1:' + p + '/fetch');
  await tryFetch('localhost', 'http://localhost:' + p + '/fetch-localhost');
  out.push(await new Promise((resolve) => {
    const ws = new WebSocket('ws://127.0.0.1:' + p + '/ws');
    ws.onopen = () => resolve('ws:open');
    ws.onerror = () => resolve('ws:blocked');
    setTimeout(() => resolve('ws:timeout'), 5000);
  }));
  out.push(await new Promise((resolve) => {
    const img = new Image();
    img.onload = () => resolve('img:loaded');
    img.onerror = () => resolve('img:blocked');
    img.src = 'http://127.0.0.1:' + p + '/img.png';
  }));
  navigator.sendBeacon('http://127.0.0.1:' + p + '/beacon', 'x');
  const frame = document.createElement('iframe');
  frame.src = 'http://127.0.0.1:' + p + '/iframe';
  document.body.appendChild(frame);
  await new Promise((r) => setTimeout(r, 500));
  frame.remove();
  return out;
}`;

const probe = (page: Page, p: number): Promise<string[]> => page.evaluate(`(${PROBE})(${p})`);

const oracle = (env: GuiEnv) =>
  createOraclePolicy({ env, task: undefined as unknown as TaskSpec, seed: 0, endpoints: [], options: {} });

test('a task page cannot reach an external host, another loopback port or a WebSocket; tasks still work', async () => {
  const pool = new BrowserEnvPool({ slots: 1 });
  try {
    const env = await pool.acquire();
    await env.reset(loadTask('click-target'), 5);
    const results = await probe(pageOf(env), port);
    assert.deepEqual(results, [
      'external:blocked',
      'external-ip:blocked',
      'loopback:blocked',
      'localhost:blocked',
      'ws:blocked',
      'img:blocked',
    ]);
    await new Promise((r) => setTimeout(r, 300)); // let a stray beacon/iframe request land, if one got out
    assert.deepEqual(seen, [], 'the loopback server received no request');
    // the same env still plays tasks normally
    const played = await playEpisode(env, loadTask('click-target'), 7, oracle);
    assert.equal(played.reward, 1);
    const other = await playEpisode(env, loadTask('enter-text'), 3, oracle);
    assert.equal(other.reward, 1);
    await pool.release(env);
  } finally {
    await pool.close();
  }
});

test('control: with allowNetwork the same probe reaches the server (the lockdown is what blocks it)', async () => {
  const pool = new BrowserEnvPool({ slots: 1, allowNetwork: true });
  try {
    const env = await pool.acquire();
    await env.reset(loadTask('click-target'), 5);
    const results = await probe(pageOf(env), port);
    assert.ok(results.includes('loopback:reachable'), results.join(', '));
    assert.ok(
      seen.some((s) => s.startsWith('GET /fetch')),
      seen.join(', ')
    );
    await pool.release(env);
  } finally {
    await pool.close();
    seen.length = 0;
  }
});
