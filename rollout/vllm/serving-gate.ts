/**
 * What the vLLM server serves right now, and the gate every request passes, so each answer is stamped
 * with the version that really produced it.
 *
 * A reload holds the gate: new requests wait at the front (they are not refused: sampling only pauses
 * for the 0.1–0.3 s of a reload), the requests already forwarded drain, and only then is vLLM paused and
 * reloaded. Draining at the front matters: a request forwarded just before vLLM's pause could otherwise
 * be admitted after it and run on the new weights while stamped with the old version.
 */

export interface Served {
  /** Campaign of the served version (null: the initial model folder, not yet tied to a campaign). */
  campaignId: string | null;
  version: number;
  kind: 'full' | 'lora';
  /** The "model" sent to vLLM: the base served name, or the LoRA adapter's name. */
  model: string;
  /** Local folder of the served weights (a full reload restores it after a refused checkpoint). */
  dir: string;
}

/** The gate stayed closed longer than a request may wait (a reload hung): the front answers 503. */
export class GateTimeoutError extends Error {
  constructor(ms: number) {
    super(`a reload held requests for over ${ms} ms`);
    this.name = 'GateTimeoutError';
  }
}

export class ServingGate {
  private inFlightCount = 0;
  private held: Promise<void> | undefined;
  private openHold: (() => void) | undefined;
  private drained: (() => void) | undefined;
  /** Set when a failed reload could not restore the previous weights: what vLLM serves is unknown. */
  broken: string | undefined;

  constructor(public served: Served) {}

  get inFlight(): number {
    return this.inFlightCount;
  }

  get holding(): boolean {
    return this.held !== undefined;
  }

  /** Waits while a reload holds the gate, then counts the request in; returns what it will be served by. */
  async enter(maxWaitMs: number): Promise<Served> {
    const deadline = Date.now() + maxWaitMs;
    while (this.held) {
      const left = deadline - Date.now();
      if (left <= 0) throw new GateTimeoutError(maxWaitMs);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.held,
        new Promise<void>((r) => {
          timer = setTimeout(r, left);
        }),
      ]);
      clearTimeout(timer);
    }
    this.inFlightCount++;
    return this.served;
  }

  leave(): void {
    this.inFlightCount--;
    if (this.inFlightCount === 0) this.drained?.();
  }

  /**
   * Closes the gate and waits for the forwarded requests to finish (at most `drainMs`; then it reopens
   * and throws, and the reload is retried later). Returns the function that reopens it.
   */
  async hold(drainMs: number): Promise<() => void> {
    if (this.held) throw new Error('the serving gate is already held (reloads must be serialized)');
    this.held = new Promise<void>((r) => (this.openHold = r));
    const release = () => {
      const open = this.openHold;
      this.held = undefined;
      this.openHold = undefined;
      open?.();
    };
    if (this.inFlightCount > 0) {
      let timer: NodeJS.Timeout | undefined;
      const ok = await Promise.race([
        new Promise<boolean>((r) => (this.drained = () => r(true))),
        new Promise<boolean>((r) => {
          timer = setTimeout(() => r(false), drainMs);
        }),
      ]);
      clearTimeout(timer);
      this.drained = undefined;
      if (!ok) {
        const n = this.inFlightCount;
        release();
        throw new Error(`${n} requests still in flight after ${drainMs} ms; reload postponed`);
      }
    }
    return release;
  }
}
