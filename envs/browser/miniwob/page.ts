/**
 * Loads a real MiniWoB++ task page into a BrowserEnv's page: 160×210 viewport, the package's files served
 * from memory (serve.ts: no network), then the in-page adapter (adapter.js) that gives the page dartflow's
 * reset/state/oracle globals. A page stays loaded across episodes of the same task (MiniWoB pages are made
 * to run episode after episode: reset re-seeds and calls core.startEpisodeReal(), which regenerates the
 * problem), as MiniWoB's own Python env does.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { MINIWOB_SCREEN, type MiniwobPage } from '../../../tasks/miniwob/spec';
import { miniwobHtmlDir, miniwobTaskFile } from './package';
import { miniwobPageUrl, serveMiniwob } from './serve';

/** The embedded policy's click grid (policy/spec.ts gridSize): oracle clicks land on its cell centres. */
export const ORACLE_GRID_SIZE = 16;

let adapterSource: string | null = null;
function adapter(): string {
  adapterSource ??= fs.readFileSync(path.join(__dirname, 'adapter.js'), 'utf8');
  return adapterSource;
}

/**
 * Checks the page exists before the browser is touched (TaskConfigError naming the task otherwise).
 * Returns a key that changes when a different page must be loaded.
 */
export function miniwobPageKey(mw: MiniwobPage, taskId: string): string {
  miniwobTaskFile(mw.task, { taskId });
  return `miniwob:${mw.task}:${String(mw.timeLimit)}`;
}

export async function loadMiniwobPage(page: Page, mw: MiniwobPage, timeoutMs: number): Promise<void> {
  const vp = page.viewportSize();
  if (vp?.width !== MINIWOB_SCREEN.width || vp.height !== MINIWOB_SCREEN.height)
    await page.setViewportSize({ ...MINIWOB_SCREEN });
  await serveMiniwob(page, miniwobHtmlDir());
  await page.goto(miniwobPageUrl(mw.task), { waitUntil: 'load', timeout: timeoutMs });
  // window.onload ran core.startEpisode() (the "START" cover); core and the task's genProblem are defined.
  const ok = await page.evaluate(
    () =>
      typeof (globalThis as unknown as { core?: { startEpisodeReal?: unknown } }).core?.startEpisodeReal === 'function'
  );
  if (!ok) throw new Error(`MiniWoB page ${mw.task} loaded without its runtime (core.js)`);
  await page.evaluate(
    (o) => {
      (globalThis as unknown as { __DARTFLOW_MINIWOB__: unknown }).__DARTFLOW_MINIWOB__ = o;
    },
    { task: mw.task, timeLimit: mw.timeLimit, gridSize: ORACLE_GRID_SIZE }
  );
  await page.evaluate(adapter());
}

/** Before each reset: the mouse leaves the task area's elements, so no hover state carries over. */
export async function parkMouse(page: Page): Promise<void> {
  await page.mouse.move(0, 0);
}
