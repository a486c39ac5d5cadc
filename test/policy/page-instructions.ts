/**
 * Every instruction the task pages can generate, without a browser: runtime.js and a page's own script
 * run in a node:vm context whose `document` is a stub (the generators only build elements and read
 * nothing back), and window.reset(seed) returns the instruction exactly as in Chromium.
 */
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { TASK_FAMILIES } from '../../tasks/families';

const PAGES = path.join(__dirname, '..', '..', 'tasks', 'pages');

/** An element that accepts whatever a generator does to it. */
function stubElement(): Record<string, unknown> {
  const el: Record<string, unknown> = {
    style: {},
    dataset: {},
    children: [] as unknown[],
    addEventListener: () => undefined,
    appendChild: (c: unknown) => (el.children as unknown[]).push(c),
    querySelector: () => stubElement(),
    getBoundingClientRect: () => ({ left: 0, top: 0, width: 0, height: 0, right: 0, bottom: 0 }),
    blur: () => undefined,
  };
  return el;
}

function pageScript(family: string): string {
  const html = fs.readFileSync(path.join(PAGES, `${family}.html`), 'utf8');
  const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
  if (scripts.length === 0) throw new Error(`${family}.html has no inline script`);
  return scripts.join('\n');
}

/** The instructions `family` generates for seeds 0…count−1. */
export function pageInstructions(family: string, count: number): string[] {
  const area = stubElement();
  const document = {
    createElement: () => stubElement(),
    getElementById: () => area,
    querySelector: () => stubElement(),
    activeElement: null,
  };
  const window: Record<string, unknown> = {};
  const context = vm.createContext({ window, document });
  vm.runInContext(fs.readFileSync(path.join(PAGES, 'runtime.js'), 'utf8'), context);
  vm.runInContext(pageScript(family), context);
  const reset = window.reset as (seed: number) => { instruction: string };
  return Array.from({ length: count }, (_, seed) => reset(seed).instruction);
}

/** Instructions of every shipped page family, `perFamily` seeds each. */
export function allPageInstructions(perFamily: number): Map<string, string[]> {
  return new Map(TASK_FAMILIES.map((f) => [f, pageInstructions(f, perFamily)]));
}
