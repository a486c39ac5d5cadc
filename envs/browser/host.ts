/**
 * One Chromium per worker process, shared by every browser env (each env is its own context).
 * A disconnected browser (crash, kill -9) is noticed through Playwright's "disconnected" event and
 * relaunched lazily by the next caller; concurrent callers share one relaunch.
 */
import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
  // No crash reporter: its handler processes outlive a killed browser and nothing collects the dumps.
  '--disable-breakpad',
];

/**
 * Task pages are self-contained (tasks/pages.ts inlines them with page.setContent), so they need no
 * network at all: every http(s)/ws(s) request a page makes — external hosts, other loopback ports, a
 * WebSocket — goes to a proxy whose name cannot resolve, and every host name (IP literals included)
 * resolves to NOTFOUND, so nothing leaves the browser. Loopback is proxied too (`<-loopback>`), and WebRTC
 * may not use UDP outside the (dead) proxy. Browser flags, not request interception: no per-request cost.
 */
export const NETWORK_LOCKDOWN_ARGS = [
  '--proxy-server=http://blocked.invalid:9',
  '--proxy-bypass-list=<-loopback>',
  '--host-resolver-rules=MAP * ~NOTFOUND',
  '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
];

export interface BrowserHostOptions {
  executablePath?: string;
  extraArgs?: string[];
  launchTimeoutMs?: number;
  /** Let task pages reach the network (off by default: see NETWORK_LOCKDOWN_ARGS). */
  allowNetwork?: boolean;
}

export class BrowserHost {
  private browser: Browser | null = null;
  private launching: Promise<Browser> | null = null;
  private closed = false;
  private pidValue: number | undefined;
  launches = 0;

  constructor(private readonly opts: BrowserHostOptions = {}) {}

  get executablePath(): string {
    return this.opts.executablePath ?? '/usr/bin/chromium';
  }

  /** PID of the current Chromium main process (Linux: found as our child with the binary's path). */
  get pid(): number | undefined {
    return this.pidValue;
  }

  isConnected(): boolean {
    return this.browser?.isConnected() ?? false;
  }

  async get(): Promise<Browser> {
    if (this.closed) throw new Error('BrowserHost is closed');
    if (this.browser?.isConnected()) return this.browser;
    this.launching ??= this.launch().finally(() => {
      this.launching = null;
    });
    return this.launching;
  }

  private async launch(): Promise<Browser> {
    const before = new Set(childPids());
    const b = await chromium.launch({
      executablePath: this.executablePath,
      headless: true,
      args: [
        ...CHROMIUM_ARGS,
        ...(this.opts.allowNetwork ? [] : NETWORK_LOCKDOWN_ARGS),
        ...(this.opts.extraArgs ?? []),
      ],
      timeout: this.opts.launchTimeoutMs ?? 30_000,
    });
    this.launches++;
    b.on('disconnected', () => {
      if (this.browser === b) this.browser = null;
    });
    this.browser = b;
    // /usr/bin/chromium is a wrapper that execs the real binary; Playwright's pipe flag marks the browser process.
    this.pidValue = childPids().find((p) => !before.has(p) && cmdline(p).includes('--remote-debugging-pipe'));
    return b;
  }

  async close(): Promise<void> {
    this.closed = true;
    const b = this.browser ?? (this.launching ? await this.launching.catch(() => null) : null);
    this.browser = null;
    await b?.close().catch(() => undefined);
  }
}

function childPids(): number[] {
  try {
    return fs
      .readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => {
        try {
          const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
          // Field 4 (ppid) follows the parenthesised command name, which may itself contain spaces.
          const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
          return Number(after[1]) === process.pid;
        } catch {
          return false;
        }
      });
  } catch {
    return [];
  }
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}
