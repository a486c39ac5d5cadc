/**
 * Builds a self-contained task page (runtime + CSS + family script inlined) so the browser env can
 * load it with page.setContent: no network, no file server. Cached per family.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TaskConfigError } from './errors';
import { isTaskFamily } from './families';

const PAGES_DIR = path.join(__dirname, 'pages');
const cache = new Map<string, string>();

export function taskPageHtml(family: string): string {
  if (!isTaskFamily(family)) throw new TaskConfigError(`unknown task family "${family}"`, undefined, 'family');
  const hit = cache.get(family);
  if (hit) return hit;
  const read = (f: string) => fs.readFileSync(path.join(PAGES_DIR, f), 'utf8');
  const html =
    `<!doctype html><html><head><meta charset="utf-8"><title>${family}</title>` +
    `<style>${read('common.css')}</style><script>${read('runtime.js')}</script></head>` +
    `<body><div id="area"></div>${read(`${family}.html`)}</body></html>`;
  cache.set(family, html);
  return html;
}
