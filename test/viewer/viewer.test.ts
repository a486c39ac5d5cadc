/**
 * The viewer in real headless Chromium against a real small campaign: real browser episodes in a fresh
 * MinIO bucket, and campaign workflows in a scratch Temporal namespace (one running without a worker,
 * one terminated). Every page renders without console errors, the trajectory page shows each step's
 * screenshot and action, bad ids and damaged objects give clear error pages, a wrong token gets 401,
 * and the server keeps serving after all of it. Screenshots of each page go to docs/viewer/ when
 * DARTFLOW_UPDATE_DOCS=1.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { registerScratchNamespace } from '../../infra/services';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { connectClient } from '../../infra/temporal-connection';
import { SEARCH_ATTRIBUTES } from '../../schemas/search-attributes';
import type { ObjectStore } from '../../storage/object-store';
import { indexKeys, partitions, readPartition } from '../../storage/trajectory-index';
import { outcomeOf } from '../../viewer/index-reader';
import { actionCaption } from '../../viewer/overlay';
import { num } from '../../viewer/html';
import { startViewer, type RunningViewer } from '../../viewer/server';
import { TemporalSource } from '../../viewer/temporal-reader';
import { freshBucket, testSettings, uniqueSuffix } from '../helpers/infra';
import { buildDataset, type Dataset } from './dataset';

const DOCS_DIR = path.join(PROJECT_ROOT, 'docs', 'viewer');
/**
 * Screenshots and page timings are refreshed in docs/viewer/ only on request
 * (`DARTFLOW_UPDATE_DOCS=1 npm test -- test/viewer`); a normal run writes them to a scratch folder, so
 * tests never change tracked files.
 */
const DOCS =
  process.env.DARTFLOW_UPDATE_DOCS === '1'
    ? DOCS_DIR
    : fs.mkdtempSync(path.join(os.tmpdir(), 'dartflow-viewer-shots-'));
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

let store: ObjectStore;
let cleanupBucket: () => Promise<void>;
let settings: InfraSettings;
let client: Client;
let temporal: TemporalSource;
let viewer: RunningViewer;
let browser: Browser;
let ctx: BrowserContext;
let data: Dataset;
const token = `tok-${uniqueSuffix()}`;
const suffix = uniqueSuffix();
const runningId = `vw-${suffix}`;
const doneId = `vw-done-${suffix}`;
const timings: Record<string, number> = {};

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

before(async () => {
  ({ store, cleanup: cleanupBucket } = await freshBucket('viewer'));
  const base = testSettings();
  settings = {
    ...(await registerScratchNamespace(base, `dartflow-viewer-${suffix}`)),
    s3: { ...base.s3, bucket: store.bucket },
  };
  data = await buildDataset(store, runningId);

  // Campaign workflows nobody executes (no worker polls their queue): visibility and describe work, the
  // status query of the running one cannot be answered — the "running campaign" case of the viewer.
  client = await connectClient(settings);
  const taskQueue = `viewer-test-nobody-${suffix}`;
  for (const [id, state] of [
    [runningId, 'running'],
    [doneId, 'completed'],
  ] as const) {
    await client.workflow.start('campaignWorkflow', {
      taskQueue,
      workflowId: `campaign-${id}`,
      args: [],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.campaignId, value: id },
        { key: SEARCH_ATTRIBUTES.state, value: state },
        { key: SEARCH_ATTRIBUTES.policyVersion, value: id === runningId ? 2 : 7 },
        { key: SEARCH_ATTRIBUTES.successRate, value: id === runningId ? 0.9 : 0.45 },
      ],
    });
  }
  await client.workflow.getHandle(`campaign-${doneId}`).terminate('viewer test: a finished campaign');
  await waitFor('visibility to list both campaigns', async () => {
    let n = 0;
    for await (const wf of client.workflow.list({ query: `WorkflowType = 'campaignWorkflow'` }))
      if (wf.workflowId === `campaign-${doneId}` ? wf.status.name === 'TERMINATED' : true) n++;
    return n === 2 ? true : undefined;
  });

  temporal = new TemporalSource(() => connectClient(settings), settings.temporal.namespace, 'http://127.0.0.1:8233');
  viewer = await startViewer({ store, temporal, token, port: 0 });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_FLAGS });
  ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  // The printed login URL sets the cookie; every later page view in this context relies on it.
  const login = await ctx.newPage();
  const res = await login.goto(viewer.loginUrl);
  assert.equal(res?.status(), 200);
  await login.close();
  fs.mkdirSync(DOCS, { recursive: true });
});

after(async () => {
  fs.writeFileSync(path.join(DOCS, 'timings.json'), JSON.stringify(timings, null, 2) + '\n');
  await browser?.close();
  await viewer?.close();
  await temporal?.close();
  await client?.workflow
    .getHandle(`campaign-${runningId}`)
    .terminate('viewer test done')
    .catch(() => undefined);
  await client?.connection.close();
  await cleanupBucket?.();
});

interface Visit {
  page: Page;
  status: number;
  errors: string[];
}

/** Opens a path in the logged-in context, collecting console errors and uncaught page errors. */
async function visit(pathAndQuery: string, label?: string, context = ctx): Promise<Visit> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  const started = Date.now();
  const res = await page.goto(`${viewer.url}${pathAndQuery}`, { waitUntil: 'load' });
  if (label) timings[label] = Date.now() - started;
  return { page, status: res?.status() ?? 0, errors };
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(DOCS, `${name}.png`), fullPage: true });
}

const text = (page: Page, selector: string) => page.locator(selector).innerText();

test('the campaigns page lists campaign workflows with state, version, success and a Temporal UI link', async () => {
  const { page, status, errors } = await visit('/', 'campaigns');
  assert.equal(status, 200);
  const running = page.locator(`tr[data-campaign="${runningId}"]`);
  const done = page.locator(`tr[data-campaign="${doneId}"]`);
  assert.match(await running.innerText(), /RUNNING\s+running\s+2\s+90\.0 %/);
  assert.match(await done.innerText(), /TERMINATED\s+completed\s+7\s+45\.0 %/);
  assert.equal(
    await running.locator('a.temporal-ui').getAttribute('href'),
    `http://127.0.0.1:8233/namespaces/${encodeURIComponent(settings.temporal.namespace)}/workflows/campaign-${runningId}`
  );
  await shoot(page, 'campaigns');
  assert.deepEqual(errors, []);
  await page.close();

  // The filter is Temporal's list query over dartflow's search attributes.
  const filtered = await visit(`/?query=${encodeURIComponent("DartflowState = 'running'")}`);
  assert.equal(filtered.status, 200);
  assert.equal(await filtered.page.locator('#campaigns tbody tr').count(), 1);
  assert.equal(await filtered.page.locator(`tr[data-campaign="${runningId}"]`).count(), 1);
  await filtered.page.close();

  const bad = await visit(`/?query=${encodeURIComponent('DartflowState = ')}`);
  assert.equal(bad.status, 400);
  assert.match(await text(bad.page, '#error'), /The filter was refused/);
  await bad.page.close();
});

test('the campaign page shows the running workflow, eval curves, train steps, discards and paged trajectories', async () => {
  const { page, status, errors } = await visit(`/campaigns/${runningId}`, 'campaign');
  assert.equal(status, 200);
  assert.equal(await text(page, '#wf-status'), 'RUNNING');
  // No orchestrator answers the status query: the page says so instead of hanging or failing.
  assert.match(await text(page, '#live-error'), /status query did not answer within 3 s/);
  assert.equal(await page.locator('#eval-charts svg').count(), 2);
  assert.match(await page.locator('#eval-charts').innerHTML(), /click-colour[\s\S]*enter-text/);
  const ledgerRows = page.locator('#ledger tbody tr');
  assert.equal(await ledgerRows.count(), data.ledger.length);
  for (const e of data.ledger)
    assert.equal(await text(page, `#ledger tr[data-step="${e.trainStep}"] td.loss`), num(e.metrics.loss));
  assert.equal(await text(page, '#discards tr[data-reason="down-sampled"] td.num'), '1');
  assert.equal(await text(page, '#discards tr[data-reason="stale"] td.num'), '1');
  // 4 real trajectories + the corrupt one + the one whose steps are gone, all from the index (no manifest read).
  assert.equal(await page.locator('#trajectories tbody tr').count(), 6);
  assert.equal(await page.locator(`#trajectories tr[data-trajectory="${data.corruptId}"]`).count(), 1);
  // Lineage: the head (v2, the workflow's DartflowPolicyVersion) was trained from v0 after v1's rollback.
  assert.match(
    await text(page, '#lineage tr[data-version="2"] td.event'),
    /head; trained from v0 after a rollback or pin \(not from v1\)/
  );
  assert.match(await text(page, '#lineage tr[data-version="1"] td.event'), /abandoned branch/);
  assert.equal(await page.locator('#lineage tr.on-line').count(), 2);
  assert.equal(await page.locator('#discards-over-time svg').count(), 1);
  assert.deepEqual(
    (await page.locator('#tasks a.task-link').allInnerTexts()).sort(),
    [...new Set(data.indexed.map((m) => m.taskId))].sort()
  );
  await shoot(page, 'campaign');
  assert.deepEqual(errors, []);
  await page.close();

  // Paging: 4 per page, following "next" reaches every trajectory exactly once.
  const seen: string[] = [];
  let next: string | null = `/campaigns/${runningId}?limit=4`;
  let pageNo = 0;
  while (next) {
    // The first page again: the unanswered status query is remembered, so this view does not wait for it.
    const v = await visit(next, pageNo++ === 0 ? 'campaign-repeat-view' : undefined);
    assert.equal(v.status, 200);
    assert.deepEqual(v.errors, []);
    seen.push(...(await v.page.locator('#trajectories tbody tr td:first-child a').allInnerTexts()));
    next = (await v.page.locator('#next-page').count())
      ? await v.page.locator('#next-page').getAttribute('href')
      : null;
    await v.page.close();
  }
  assert.equal(new Set(seen).size, seen.length, 'no trajectory on two pages');
  assert.deepEqual(new Set(seen), new Set([...data.trajectories.keys(), data.corruptId, data.goneId]));
  assert.equal(seen.length, 6);
});

test('the trajectory page shows one screenshot per step with the stored actions, and ← → step through', async () => {
  for (const [id, name] of [
    ['g-click-e0', 'trajectory-click'],
    ['g-text-e0', 'trajectory-type'],
    ['g-scroll-e0', 'trajectory-scroll'],
  ] as const) {
    const stored = data.trajectories.get(id)!;
    const { page, status, errors } = await visit(`/campaigns/${runningId}/trajectories/${id}`, name);
    assert.equal(status, 200);
    const shots = page.locator('.step img.shot');
    assert.equal(await shots.count(), stored.steps.length);
    assert.equal(stored.steps.length, stored.manifest.numSteps);
    // Every screenshot came through the viewer from MinIO and decoded.
    assert.equal(
      await shots.evaluateAll((imgs) =>
        (imgs as unknown as Array<{ complete: boolean; naturalWidth: number }>).every(
          (i) => i.complete && i.naturalWidth > 0
        )
      ),
      true
    );
    assert.deepEqual(
      await page.locator('.action-text').allTextContents(),
      stored.steps.map((s) => s.actionText)
    );
    assert.deepEqual(
      await page.locator('.step .caption').allTextContents(),
      stored.steps.map((s) => actionCaption(s.action))
    );
    for (const s of stored.steps) {
      const a = s.action;
      if (a?.type === 'click') {
        const g = page.locator(`#step-${s.step} svg.overlay g.act-click`);
        assert.equal(Number(await g.getAttribute('data-x')), a.x);
        assert.equal(Number(await g.getAttribute('data-y')), a.y);
      }
      if (a?.type === 'scroll')
        assert.equal(await page.locator(`#step-${s.step} g.act-scroll`).getAttribute('data-direction'), a.direction);
      if (a?.type === 'type') assert.equal(await text(page, `#step-${s.step} .shot-wrap .typed`), `⌨ ${a.text}`);
    }
    assert.equal(await text(page, '#reward'), num(stored.manifest.reward));
    if (stored.steps.length > 1) {
      assert.equal(await page.locator('body').getAttribute('data-current-step'), '0');
      await page.keyboard.press('ArrowRight');
      assert.equal(await page.locator('body').getAttribute('data-current-step'), '1');
      assert.equal(await page.locator('.step.current').getAttribute('id'), 'step-1');
      await page.keyboard.press('ArrowLeft');
      assert.equal(await page.locator('body').getAttribute('data-current-step'), '0');
    }
    if (id === 'g-scroll-e0') assert.match(await text(page, '#discard'), /stale \(prune at train step 2/);
    else if (id === 'g-click-e0') assert.match(await text(page, '#discard'), /no discard record names it/);
    await shoot(page, name);
    assert.deepEqual(errors, []);
    await page.close();
  }
  const types = new Set([...data.trajectories.values()].flatMap((t) => t.steps.map((s) => s.action?.type)));
  for (const t of ['click', 'type', 'scroll']) assert.ok(types.has(t as never), `the dataset has a ${t} step`);
});

test('the trajectory page shows, per step, the advantage, selection and IS weight of each train step that consumed it', async () => {
  for (const id of ['g-click-e0', 'g-click-e1']) {
    const stored = data.trajectories.get(id)!;
    const { page, status, errors } = await visit(`/campaigns/${runningId}/trajectories/${id}`);
    assert.equal(status, 200);
    // Both train steps of the dataset consumed the click group; found through checkpoints v1 and v2.
    assert.deepEqual(
      await page.locator('#trained .consumer').evaluateAll((els) => els.map((e) => e.getAttribute('data-train-step'))),
      ['1', '2']
    );
    for (const [trainStep, rows] of data.trainSamples) {
      const mine = rows.filter((r) => r.trajectoryId === id);
      assert.equal(mine.length, stored.steps.length, 'the record has a row per step');
      for (const r of mine) {
        const at = `#step-${r.step} .training[data-train-step="${trainStep}"]`;
        assert.equal(await text(page, `${at} .consumed-by`), String(trainStep));
        assert.equal(await text(page, `${at} .advantage`), num(r.advantage));
        assert.equal(await text(page, `${at} .selected`), r.selected ? 'yes' : 'no (low entropy)');
        assert.equal(await text(page, `${at} .is-weight`), num(r.isWeight));
        assert.equal(await text(page, `${at} .train-entropy`), num(r.entropy));
      }
    }
    // Step 2 of the dataset left each trajectory's first step out.
    assert.equal(await text(page, '#step-0 .training[data-train-step="2"] .selected'), 'no (low entropy)');
    if (id === 'g-click-e1') assert.match(await text(page, '#discard'), /down-sampled \(train at train step 2/);
    if (id === 'g-click-e0') await shoot(page, 'trajectory-trained');
    assert.deepEqual(errors, []);
    await page.close();
  }
  // An untrained trajectory: no train step after its version consumed it, and its discard reason stays.
  const { page, errors } = await visit(`/campaigns/${runningId}/trajectories/g-scroll-e0`);
  assert.match(await text(page, '#trained'), /not consumed by a train step writing v1 – v2/);
  assert.equal(await page.locator('.training').count(), 0);
  assert.match(await text(page, '#discard'), /stale \(prune at train step 2/);
  assert.deepEqual(errors, []);
  await page.close();
});

test('the group page shows the group’s trajectories side by side with the down-sampled one named', async () => {
  const { page, status, errors } = await visit(`/campaigns/${runningId}/groups/g-click`, 'group');
  assert.equal(status, 200);
  const cols = page.locator('#group .col');
  assert.equal(await cols.count(), 2);
  for (const id of ['g-click-e0', 'g-click-e1']) {
    const stored = data.trajectories.get(id)!;
    assert.equal(await page.locator(`.col[data-trajectory="${id}"] img.shot`).count(), stored.steps.length);
  }
  const discarded = await visit(`/campaigns/${runningId}/trajectories/g-click-e1`);
  assert.match(await text(discarded.page, '#discard'), /down-sampled \(train at train step 2/);
  assert.deepEqual(discarded.errors, []);
  await discarded.page.close();
  await shoot(page, 'group');
  assert.deepEqual(errors, []);
  await page.close();
});

test('unknown ids, deleted and corrupt objects get a clear error page; the server keeps serving', async () => {
  const cases: Array<[string, number, RegExp, string?]> = [
    ['/campaigns/no-such-campaign', 404, /No campaign "no-such-campaign"/, 'error-unknown-campaign'],
    [`/campaigns/${runningId}/trajectories/${'x'.repeat(300)}`, 404, /not a valid trajectory id/],
    [`/campaigns/${runningId}?after=${encodeURIComponent('../x')}`, 404, /not a valid trajectory id/],
    [`/campaigns/${runningId}/trajectories/no-such-e0`, 404, /trajectories\/no-such-e0\/manifest\.json does not exist/],
    [
      `/campaigns/${runningId}/trajectories/${data.corruptId}`,
      500,
      /manifest\.json: does not match its schema at "reward"/,
      'error-corrupt-manifest',
    ],
    [`/campaigns/${runningId}/trajectories/${data.goneId}`, 404, /gone-e0\/steps\.jsonl does not exist/],
    [`/campaigns/${runningId}/groups/no-such-group`, 404, /No trajectory no-such-group-e<i>/],
    ['/campaigns/...', 404, /not a valid campaign id/],
    [`/campaigns/${encodeURIComponent('a/../../b')}`, 404, /not a valid campaign id/],
    ['/campaigns/%E0%A4%A', 400, /not valid percent-encoding/],
    ['/nothing/here', 404, /Nothing is served/],
    [
      `/campaigns/${runningId}/tasks/no-such-task`,
      404,
      /no trajectory of task "no-such-task" in its index/,
      'error-unknown-task',
    ],
    ['/campaigns/no-such-campaign/tasks/click-colour', 404, /No data under campaigns\/no-such-campaign\//],
    [`/campaigns/${runningId}/search?outcome=great`, 400, /outcome "great" is not one of: success, failure, error/],
    [`/campaigns/${runningId}/search?version=v2`, 400, /not a policy version number/],
    [`/campaigns/${runningId}/search?before=yesterday`, 404, /not a page cursor/],
    [`/campaigns/${runningId}?steps=x`, 400, /not a train step number/],
  ];
  for (const [p, code, message, shotName] of cases) {
    const { page, status, errors } = await visit(p);
    assert.equal(status, code, p);
    assert.match(await text(page, '#error'), message, p);
    assert.equal(await page.locator('h1').count(), 1, `${p} renders a page`);
    if (shotName) await shoot(page, shotName);
    // The document's own non-2xx status is the one console message Chromium logs for an error page.
    assert.ok(
      errors.every((e) => /status of \d{3}/.test(e)),
      `${p}: ${errors.join('; ')}`
    );
    await page.close();
  }
  const auth = { Authorization: `Bearer ${token}` };
  const missingShot = await fetch(`${viewer.url}/screenshots/${'0'.repeat(64)}.png`, { headers: auth });
  assert.equal(missingShot.status, 404);
  assert.match(await missingShot.text(), /screenshots\/0{64}\.png does not exist/);
  const post = await fetch(`${viewer.url}/`, { method: 'POST', headers: auth });
  assert.equal(post.status, 405);
  const alive = await fetch(`${viewer.url}/campaigns/${runningId}`, { headers: auth });
  assert.equal(alive.status, 200);
});

test('a wrong or missing token gets 401, in the browser and over HTTP', async () => {
  const fresh = await browser.newContext();
  const { page, status } = await visit('/?token=wrong-token', undefined, fresh);
  assert.equal(status, 401);
  assert.match(await text(page, '#error'), /needs its token/);
  assert.equal(await page.locator('#campaigns').count(), 0);
  await shoot(page, 'unauthorized');
  await fresh.close();

  const url = `${viewer.url}/campaigns/${runningId}`;
  assert.equal((await fetch(url)).status, 401);
  assert.equal((await fetch(url, { headers: { Authorization: 'Bearer nope' } })).status, 401);
  assert.equal((await fetch(url, { headers: { Cookie: 'dartflow_viewer=nope' } })).status, 401);
  const shot = data.trajectories.get('g-click-e0')!.steps[0]!.observationKey;
  assert.equal((await fetch(`${viewer.url}/${shot}`)).status, 401, 'screenshots need the token too');
  assert.equal((await fetch(url, { headers: { Authorization: `Bearer ${token}` } })).status, 200);
  assert.equal((await fetch(`${viewer.url}/${shot}`, { headers: { Authorization: `Bearer ${token}` } })).status, 200);
});

test('the index is written by the real write path: runEpisode indexes each trajectory, recordDiscards each decision', async () => {
  for (const taskId of new Set(data.indexed.map((m) => m.taskId))) {
    const r = await readPartition(store, runningId, 'trajectories', partitions.task(taskId));
    assert.deepEqual(r.unreadable, []);
    assert.deepEqual(
      r.entries.map((e) => e.trajectoryId).sort(),
      data.indexed
        .filter((m) => m.taskId === taskId)
        .map((m) => m.trajectoryId)
        .sort()
    );
    for (const e of r.entries) {
      const m = data.indexed.find((x) => x.trajectoryId === e.trajectoryId)!;
      assert.deepEqual(
        [e.reward, e.status, e.source, e.steps, e.maxSteps, e.minVersion, e.createdAt],
        [m.reward, m.status, m.source, m.numSteps, m.maxSteps, m.minPolicyVersion, m.createdAt]
      );
    }
  }
  const discards = await readPartition(store, runningId, 'discards', partitions.all);
  assert.deepEqual(discards.entries.map((e) => `${e.groupId}:${e.reason}:${e.trajectories}`).sort(), [
    'g-click:down-sampled:1',
    'g-scroll:stale:1',
  ]);
});

test('the task page shows success over time, rollout count and step budget per group, and the pool', async () => {
  const { page, status, errors } = await visit(`/campaigns/${runningId}/tasks/click-colour`, 'task');
  assert.equal(status, 200);
  const mine = data.indexed.filter((m) => m.taskId === 'click-colour');
  const ok = mine.filter((m) => m.status === 'ok');
  const wins = ok.filter((m) => outcomeOf(m) === 'success');
  assert.match(await text(page, '#task-success'), new RegExp(`of ${ok.length}$`));
  assert.equal(await text(page, '#task-success'), `${((wins.length / ok.length) * 100).toFixed(1)} % of ${ok.length}`);
  assert.equal(await page.locator('#task-charts svg').count(), 4);
  // g-click: 2 episodes, budget = the larger maxSteps of the two.
  const g = mine.filter((m) => m.groupId === 'g-click');
  assert.equal(await text(page, '#groups tr[data-group="g-click"] td.n'), String(g.length));
  assert.equal(
    await text(page, '#groups tr[data-group="g-click"] td.budget'),
    String(Math.max(...g.map((m) => m.maxSteps)))
  );
  // The pool holds the oracle's success, written by addToPool.
  assert.deepEqual(
    await page.locator('#pool tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trajectory'))),
    ['g-click-e0']
  );
  assert.equal(await page.locator('#trajectories tbody tr').count(), mine.length);
  await shoot(page, 'task');
  assert.deepEqual(errors, []);
  await page.close();
});

test('search returns exactly the trajectories that match task, outcome, version and source, paged', async () => {
  const all = data.indexed;
  const cases: Array<[string, (m: (typeof all)[number]) => boolean]> = [
    ['', () => true],
    ['task=click-colour', (m) => m.taskId === 'click-colour'],
    ['outcome=success', (m) => outcomeOf(m) === 'success'],
    ['outcome=failure', (m) => outcomeOf(m) === 'failure'],
    ['task=click-colour&outcome=failure', (m) => m.taskId === 'click-colour' && outcomeOf(m) === 'failure'],
    ['version=0', (m) => m.minPolicyVersion <= 0 && m.maxPolicyVersion >= 0],
    ['version=1', () => false],
    ['source=rollout', (m) => m.source === 'rollout'],
    ['source=demo', (m) => m.source === 'demo'],
    ['source=pool', (m) => m.trajectoryId === 'g-click-e0'],
  ];
  assert.ok(all.some((m) => outcomeOf(m) === 'success') && all.some((m) => outcomeOf(m) === 'failure'));
  for (const [query, want] of cases) {
    // Pages of 2: following "next" collects the whole result, each trajectory once.
    const seen: string[] = [];
    let next: string | null = `/campaigns/${runningId}/search?${query}${query ? '&' : ''}limit=2`;
    let pages = 0;
    while (next) {
      const v = await visit(next, query === 'task=click-colour' && pages === 0 ? 'search' : undefined);
      assert.equal(v.status, 200, query);
      assert.deepEqual(v.errors, [], query);
      if (query === 'task=click-colour' && pages === 0) await shoot(v.page, 'search');
      seen.push(
        ...(await v.page
          .locator('#results tbody tr')
          .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trajectory')!)))
      );
      next = (await v.page.locator('#next-page').count())
        ? await v.page.locator('#next-page').getAttribute('href')
        : null;
      await v.page.close();
      assert.ok(++pages < 20, 'paging ends');
    }
    assert.equal(new Set(seen).size, seen.length, `${query}: no trajectory on two pages`);
    assert.deepEqual(
      seen.sort(),
      all
        .filter(want)
        .map((m) => m.trajectoryId)
        .sort(),
      query
    );
  }
});

test('a corrupt index shard is named on the page; the task’s other entries still show', async () => {
  const prefix = indexKeys.partition(runningId, 'trajectories', partitions.task('enter-text'));
  const badKey = `${prefix}d-0000000000001-corrupt.jsonl`;
  await store.putBytes(badKey, Buffer.from('{"trajectoryId": "half-writ'), 'application/x-ndjson');
  for (const p of [`/campaigns/${runningId}/tasks/enter-text`, `/campaigns/${runningId}/search?task=enter-text`]) {
    const { page, status, errors } = await visit(p);
    assert.equal(status, 200, p);
    const box = await text(page, '.unreadable');
    assert.ok(box.includes(badKey), `${p} names the shard`);
    assert.match(box, /line 1 is not valid JSON/);
    assert.equal(
      (await page.locator('tr[data-trajectory="g-text-e0"]').count()) > 0,
      true,
      `${p} still shows the task's trajectory`
    );
    if (p.includes('/tasks/')) await shoot(page, 'error-corrupt-index');
    assert.deepEqual(errors, []);
    await page.close();
  }
  await store.remove(badKey);
});
