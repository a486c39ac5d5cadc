/**
 * A browser env: one Playwright context + page in the shared Chromium, showing one task page at
 * 160×160. Screenshots go through raw CDP (Page.captureScreenshot), the fastest path measured.
 * Any sign of a dead page or browser becomes EnvCrashedError; the pool then replaces this env.
 */
import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { CanonicalActionSchema, type CanonicalAction } from '../../schemas/actions';
import { miniwobPageOf, MINIWOB_SCREEN } from '../../tasks/miniwob/spec';
import { taskPageHtml } from '../../tasks/pages';
import type { TaskSpec } from '../../tasks/schema';
import { EnvCrashedError, EnvError, TaskConfigError, withTimeout } from '../errors';
import type { EvalResult, GuiEnv, Observation, ResetResult, StepResult } from '../types';
import { executeAction } from './executor';
import type { BrowserHost } from './host';
import { loadMiniwobPage, miniwobPageKey, parkMouse } from './miniwob/page';

export interface BrowserEnvOptions {
  width?: number;
  height?: number;
  /** Deadline for one env operation (reset, step, screenshot). */
  opTimeoutMs?: number;
}

interface PageState {
  done: boolean;
  reward: number;
  reason: string;
}

const CRASH_PATTERNS =
  /Target crashed|has been closed|Browser closed|browser has disconnected|Target closed|Session closed|Protocol error|crashed/i;

export class BrowserEnv implements GuiEnv {
  readonly kind = 'browser';
  private context: BrowserContext | null = null;
  private page: Page | null = null;
  private cdp: CDPSession | null = null;
  /** The page loaded now: a dartflow family, or a MiniWoB++ page key (miniwob/page.ts). */
  private family: string | null = null;
  /** The current screen: the env's size for dartflow pages, 160×210 for MiniWoB++ pages. */
  private screen: { width: number; height: number };
  private crashed = false;
  private agentEnded = false;
  readonly width: number;
  readonly height: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly host: BrowserHost,
    readonly id: string,
    opts: BrowserEnvOptions = {}
  ) {
    this.width = opts.width ?? 160;
    this.height = opts.height ?? 160;
    this.timeoutMs = opts.opTimeoutMs ?? 15_000;
    this.screen = { width: this.width, height: this.height };
  }

  /** True when this env has seen its page or browser die (the pool discards it on release). */
  get broken(): boolean {
    return this.crashed || (this.page !== null && (this.page.isClosed() || !this.host.isConnected()));
  }

  private async ensurePage(): Promise<Page> {
    if (this.page && !this.page.isClosed() && this.host.isConnected() && !this.crashed) return this.page;
    await this.dispose();
    const browser = await this.host.get();
    const context = await browser.newContext({
      viewport: { width: this.width, height: this.height },
      deviceScaleFactor: 1,
    });
    const page = await context.newPage();
    page.on('crash', () => {
      this.crashed = true;
    });
    this.context = context;
    this.page = page;
    this.cdp = await context.newCDPSession(page);
    this.family = null;
    this.crashed = false;
    return page;
  }

  /** Runs one env operation with a deadline, turning browser deaths into EnvCrashedError. */
  private async guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await withTimeout(fn(), this.timeoutMs, `${this.id}: ${what}`, this.id);
    } catch (err) {
      if (err instanceof EnvError || err instanceof TaskConfigError) {
        if (err instanceof EnvError) this.crashed = true;
        throw err;
      }
      const msg = err instanceof Error ? err.message : String(err);
      // An exception thrown by the task page's own script (healthy page, healthy browser) is a task bug:
      // deterministic, so retrying elsewhere cannot help.
      if (
        /^page\.evaluate: \w*Error\b/.test(msg) &&
        !CRASH_PATTERNS.test(msg) &&
        this.host.isConnected() &&
        this.page &&
        !this.page.isClosed()
      ) {
        throw new TaskConfigError(`${this.id}: task page script failed in ${what}: ${msg.split('\n')[0]}`);
      }
      this.crashed = true;
      if (CRASH_PATTERNS.test(msg) || !this.host.isConnected())
        throw new EnvCrashedError(`${this.id}: ${what}: browser or page died (${msg.split('\n')[0]})`, this.id);
      throw new EnvCrashedError(`${this.id}: ${what} failed: ${msg.split('\n')[0]}`, this.id);
    }
  }

  async reset(task: TaskSpec, seed: number): Promise<ResetResult> {
    // A real MiniWoB++ page (tasks/miniwob/spec.ts) or one of dartflow's own. Either way a TaskConfigError
    // for a bad task (unknown family, a page the miniwob package lacks) comes before touching the browser.
    const miniwob = miniwobPageOf(task);
    const pageKey = miniwob ? miniwobPageKey(miniwob, task.id) : task.family;
    const html = miniwob ? '' : taskPageHtml(task.family);
    const screen = miniwob ? { ...MINIWOB_SCREEN } : { width: this.width, height: this.height };
    const { instruction, fields } = await this.guard('reset', async () => {
      const page = await this.ensurePage();
      if (this.family !== pageKey) {
        // Leaving a MiniWoB page: a fresh document, so none of its timers outlive it.
        if (this.family?.startsWith('miniwob:')) await page.goto('about:blank');
        if (miniwob) await loadMiniwobPage(page, miniwob, this.timeoutMs);
        else {
          const vp = page.viewportSize();
          if (vp?.width !== screen.width || vp.height !== screen.height) await page.setViewportSize(screen);
          await page.setContent(html, { waitUntil: 'load' });
        }
        this.family = pageKey;
      }
      if (miniwob) await parkMouse(page);
      this.screen = screen;
      return page.evaluate(
        (s) => (globalThis as unknown as { reset(s: number): { instruction: string; fields: string[] } }).reset(s),
        seed
      );
    });
    this.agentEnded = false;
    return { instruction, fields, observation: await this.observe() };
  }

  async observe(): Promise<Observation> {
    return this.guard('observe', async () => {
      const cdp = this.cdp;
      if (!cdp || !this.page) throw new EnvCrashedError(`${this.id}: observe before reset`, this.id);
      const shot = (await cdp.send('Page.captureScreenshot', { format: 'png', optimizeForSpeed: true })) as {
        data: string;
      };
      return { png: Buffer.from(shot.data, 'base64'), width: this.screen.width, height: this.screen.height };
    });
  }

  private async pageState(): Promise<PageState> {
    const page = this.page;
    if (!page) throw new EnvCrashedError(`${this.id}: no page`, this.id);
    return page.evaluate(() => (globalThis as unknown as { state(): PageState }).state());
  }

  async step(action: CanonicalAction): Promise<StepResult> {
    return this.guard('step', async () => {
      const page = this.page;
      if (!page) throw new EnvCrashedError(`${this.id}: step before reset`, this.id);
      const res = await executeAction(page, action, this.screen);
      if (action.type === 'finished' || action.type === 'call_user') this.agentEnded = true;
      const st = await this.pageState();
      return { done: st.done || this.agentEnded, actionOk: res.ok, ...(res.ok ? {} : { error: res.error }) };
    });
  }

  async evaluate(): Promise<EvalResult> {
    return this.guard('evaluate', async () => {
      const st = await this.pageState();
      // An episode the agent ended without completing the task is a failure (OSWorld: DONE → evaluate).
      return { reward: st.done ? st.reward : 0, done: st.done || this.agentEnded, reason: st.reason };
    });
  }

  async oracle(): Promise<CanonicalAction | null> {
    const raw = await this.guard('oracle', async () => {
      const page = this.page;
      if (!page) throw new EnvCrashedError(`${this.id}: oracle before reset`, this.id);
      return page.evaluate(() => (globalThis as unknown as { oracle(): unknown }).oracle());
    });
    if (raw === null || raw === undefined) return null;
    const parsed = CanonicalActionSchema.safeParse(raw);
    if (!parsed.success)
      throw new TaskConfigError(`task page oracle returned an invalid action: ${JSON.stringify(raw)}`);
    return parsed.data;
  }

  private async dispose(): Promise<void> {
    const ctx = this.context;
    this.context = null;
    this.page = null;
    this.cdp = null;
    this.family = null;
    if (ctx) await ctx.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    await this.dispose();
  }
}
