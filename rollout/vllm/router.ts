/**
 * Least-loaded routing over VLM policy endpoints, on the env side. Each endpoint's load is the requests of
 * other clients there (`GET <baseUrl>/load?client=<clientId>`: the front counts each client's requests, named
 * by the `x-dartflow-client` header, and reports the others' as `inFlightOthers`; re-asked in the background
 * once older than `loadTtlMs`) plus this process's own in flight now, counted exactly; the endpoint with the
 * least wins, ties go round-robin. An endpoint that refuses or dies (transport error, 5xx, /load unhealthy
 * or refused) is taken out for `penaltyMs`, so episodes stop waiting on it while the campaign's registry
 * refresh catches up. A /load that is merely slow (a busy machine) keeps the last report: only
 * `maxSlowLoads` slow answers in a row take the endpoint out. A server without the front (/load answers
 * 4xx: plain vLLM, another API) is routed by this process's own in-flight count.
 *
 * One router per endpoint set and process (`sharedRouter`): concurrent episodes of an env worker share
 * the counts, which is what makes "least loaded" mean anything.
 */
import { randomUUID } from 'node:crypto';

export interface EndpointRouter {
  /** Sent with each request as `x-dartflow-client`, so the front can tell this client's load from others'. */
  readonly clientId?: string;
  /** The endpoint for the next attempt; endpoints in `tried` are avoided while others are available. */
  pick(tried?: ReadonlySet<string>): Promise<string>;
  begin(url: string): void;
  end(url: string): void;
  /** The endpoint refused or died: out of rotation for a while. */
  markFailed(url: string, why?: string): void;
}

export interface RouterOptions {
  baseUrls: string[];
  apiKey?: string;
  loadTtlMs?: number;
  penaltyMs?: number;
  loadTimeoutMs?: number;
  /** Slow /load answers in a row (timeouts) before the endpoint is taken out (default 3). */
  maxSlowLoads?: number;
  now?: () => number;
  fetchImpl?: typeof fetch;
}

interface EndpointState {
  /**
   * Requests of other clients (other env workers) at the last report: the front's `inFlightOthers` (a front
   * older than that field: its in-flight count minus this process's own now). undefined: no report (a
   * server without the front).
   */
  others: number | undefined;
  reportedAt: number;
  /** This process's requests in flight there now: exact, unlike any report. */
  local: number;
  outUntil: number;
  probing: Promise<void> | undefined;
  /** /load timeouts in a row. */
  slowLoads: number;
}

export class LeastLoadedRouter implements EndpointRouter {
  private readonly state = new Map<string, EndpointState>();
  private turn = 0;
  readonly clientId = randomUUID();
  private readonly now: () => number;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly o: RouterOptions) {
    if (o.baseUrls.length === 0) throw new Error('LeastLoadedRouter needs at least one endpoint');
    this.now = o.now ?? Date.now;
    this.fetchImpl = o.fetchImpl ?? fetch;
    for (const u of o.baseUrls)
      this.state.set(u, {
        others: undefined,
        reportedAt: -Infinity,
        local: 0,
        outUntil: 0,
        probing: undefined,
        slowLoads: 0,
      });
  }

  private s(url: string): EndpointState {
    const s = this.state.get(url);
    if (!s) throw new Error(`unknown endpoint ${url}`);
    return s;
  }

  private refresh(url: string): Promise<void> {
    const s = this.s(url);
    if (this.now() - s.reportedAt < (this.o.loadTtlMs ?? 1000)) return Promise.resolve();
    s.probing ??= (async () => {
      const timeout = AbortSignal.timeout(this.o.loadTimeoutMs ?? 1000);
      try {
        const res = await this.fetchImpl(`${url.replace(/\/+$/, '')}/load?client=${this.clientId}`, {
          headers: this.o.apiKey ? { authorization: `Bearer ${this.o.apiKey}` } : {},
          signal: timeout,
        });
        const body = (await res.json().catch(() => undefined)) as
          { inFlight?: unknown; inFlightOthers?: unknown; healthy?: unknown } | undefined;
        // The timeout fired while the body was read: as slow as no answer at all.
        if (timeout.aborted) throw new Error('timed out reading the answer');
        s.slowLoads = 0;
        // 4xx: a server without the dartflow front (plain vLLM, another API): no report, not a failure.
        if (res.status >= 400 && res.status < 500) s.others = undefined;
        else if (!res.ok || body?.healthy === false)
          this.markFailed(url, `/load answered HTTP ${res.status}${body?.healthy === false ? ', unhealthy' : ''}`);
        else if (typeof body?.inFlightOthers === 'number') s.others = body.inFlightOthers;
        else s.others = typeof body?.inFlight === 'number' ? Math.max(0, body.inFlight - s.local) : undefined;
      } catch (err) {
        // Slow is not dead: on a busy machine a /load can miss its timeout while the server serves on.
        // The last report stands until several in a row time out; a refused connection is a failure now.
        if (timeout.aborted && ++s.slowLoads < (this.o.maxSlowLoads ?? 3)) return;
        const why = timeout.aborted
          ? `/load timed out ${s.slowLoads} times in a row (${this.o.loadTimeoutMs ?? 1000} ms each)`
          : `/load failed: ${err instanceof Error ? err.message : String(err)}`;
        s.slowLoads = 0; // after the penalty the endpoint starts with a clean slate
        this.markFailed(url, why);
      } finally {
        s.reportedAt = this.now();
        s.probing = undefined;
      }
    })();
    return s.probing;
  }

  async pick(tried: ReadonlySet<string> = new Set()): Promise<string> {
    const urls = this.o.baseUrls;
    const inRotation = urls.filter((u) => this.s(u).outUntil <= this.now());
    // Only an endpoint never asked yet is waited for; later reports refresh in the background and the pick
    // uses the last one. Awaiting every refresh put a /load round trip on the request path of an act()
    // once a second.
    await Promise.all(inRotation.filter((u) => this.s(u).reportedAt === -Infinity).map((u) => this.refresh(u)));
    for (const u of inRotation) void this.refresh(u);
    const now = this.now();
    // Own requests counted exactly, other clients' as of their last report: a report a second old no longer
    // counts requests of this process that have finished since (that herded every pick onto one server).
    const load = (u: string) => {
      const s = this.s(u);
      return s.local + (s.others ?? 0);
    };
    const start = this.turn++ % urls.length;
    const order = urls.map((_, i) => urls[(start + i) % urls.length]!);
    const usable = order.filter((u) => this.s(u).outUntil <= now);
    const fresh = usable.filter((u) => !tried.has(u));
    const pool = fresh.length > 0 ? fresh : usable;
    if (pool.length === 0) {
      // Everything is out: try the one that comes back first rather than failing without a request.
      return order.reduce((a, b) => (this.s(b).outUntil < this.s(a).outUntil ? b : a));
    }
    return pool.reduce((a, b) => (load(b) < load(a) ? b : a));
  }

  begin(url: string): void {
    const s = this.s(url);
    s.local++;
  }

  end(url: string): void {
    const s = this.s(url);
    s.local = Math.max(0, s.local - 1);
  }

  markFailed(url: string, why = 'refused or failed a request'): void {
    const s = this.s(url);
    const penaltyMs = this.o.penaltyMs ?? 30_000;
    // Once per outage, so an env worker's log says which server left the rotation and why.
    if (s.outUntil <= this.now()) console.warn(`[router] ${url} out of rotation for ${penaltyMs / 1000} s: ${why}`);
    s.outUntil = this.now() + penaltyMs;
  }

  /** Asks every endpoint in rotation for its load now and waits for the answers (tests, start-up). */
  async refreshNow(): Promise<void> {
    await Promise.all(
      this.o.baseUrls
        .filter((u) => this.s(u).outUntil <= this.now())
        .map((u) => {
          this.s(u).reportedAt = -Infinity;
          return this.refresh(u);
        })
    );
  }

  /** True while the endpoint is out of rotation (tests, metrics). */
  isOut(url: string): boolean {
    return this.s(url).outUntil > this.now();
  }
}

const shared = new Map<string, LeastLoadedRouter>();

/** The process-wide router of an endpoint set (same URLs and key → same counts). */
export function sharedRouter(baseUrls: string[], apiKey?: string): LeastLoadedRouter {
  const key = `${apiKey ?? ''}\n${[...baseUrls].sort().join('\n')}`;
  let r = shared.get(key);
  if (!r) {
    r = new LeastLoadedRouter({ baseUrls: [...baseUrls], ...(apiKey ? { apiKey } : {}) });
    // Endpoint lists change with the registry; keep the map from growing without bound.
    if (shared.size >= 64) shared.clear();
    shared.set(key, r);
  }
  return r;
}
