/**
 * Simulated env for scale and efficiency benchmarks (hundreds of envs, no browser): configurable
 * reset/step latency distributions (a heavy-tailed OSWorld-like profile among them), replayed
 * observations and a synthetic reward model. Pure timers, so 500 envs cost almost no CPU.
 *
 * Reward models: `path` (default) — each seed defines a hidden sequence of 1–3 target cells of the
 * 16×16 click grid; clicking them in order succeeds (so oracle and random policies behave as on a real
 * task); `bernoulli` — success with probability p at the end of the episode (for pure throughput runs).
 */
import { PNG } from 'pngjs';
import type { CanonicalAction } from '../schemas/actions';
import type { TaskSpec } from '../tasks/schema';
import { EnvCrashedError } from './errors';
import { SlotPool } from './slot-pool';
import type { EvalResult, GuiEnv, Observation, ResetResult, StepResult } from './types';

/** Latency in ms: lognormal body (median, sigma) plus an optional Pareto tail with probability p. */
export interface LatencyDist {
  medianMs: number;
  sigma: number;
  tail?: { p: number; scaleMs: number; alpha: number; capMs: number };
}

export interface SimProfile {
  name: string;
  reset: LatencyDist;
  step: LatencyDist;
  observe: LatencyDist;
  /** Probability that a step crashes the env (EnvCrashedError), to exercise retry paths at scale. */
  crashProb: number;
}

export const SIM_PROFILES: Record<string, SimProfile> = {
  /** A no-wait profile: measures the framework's own overhead. */
  fast: {
    name: 'fast',
    reset: { medianMs: 2, sigma: 0.2 },
    step: { medianMs: 1, sigma: 0.2 },
    observe: { medianMs: 0.5, sigma: 0.2 },
    crashProb: 0,
  },
  /** The measured 160×160 Chromium env (env-and-policy.md A3): ~13–35 ms per step. */
  browser: {
    name: 'browser',
    reset: { medianMs: 3, sigma: 0.3 },
    step: { medianMs: 14, sigma: 0.25 },
    observe: { medianMs: 16, sigma: 0.1 },
    crashProb: 0,
  },
  /**
   * OSWorld-like: every step sleeps its 2 s pause plus execution, with rare very slow steps; resets
   * revert a VM snapshot and replay setup (tens of seconds, tail to minutes). dart-spec §2.7.
   */
  osworld: {
    name: 'osworld',
    reset: { medianMs: 25_000, sigma: 0.45, tail: { p: 0.05, scaleMs: 60_000, alpha: 1.3, capMs: 300_000 } },
    step: { medianMs: 2_600, sigma: 0.3, tail: { p: 0.03, scaleMs: 6_000, alpha: 1.5, capMs: 120_000 } },
    observe: { medianMs: 300, sigma: 0.4, tail: { p: 0.01, scaleMs: 2_000, alpha: 1.5, capMs: 10_000 } },
    crashProb: 0.002,
  },
};

export type RewardModel = { kind: 'path' } | { kind: 'bernoulli'; p: number };

export interface SimulatedEnvOptions {
  profile: SimProfile;
  /** Multiplies every latency (0.01 runs an OSWorld profile 100× faster with the same shape). */
  timeScale?: number;
  rewardModel?: RewardModel;
  /** Observations to replay (PNG bytes); default: 8 synthetic 160×160 frames. */
  observations?: Uint8Array[];
  seed?: number;
}

function rng32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function sampleLatency(d: LatencyDist, rand: () => number): number {
  // Box–Muller normal for the lognormal body.
  const u1 = Math.max(rand(), 1e-12);
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * rand());
  let ms = d.medianMs * Math.exp(d.sigma * z);
  if (d.tail && rand() < d.tail.p)
    ms += Math.min(d.tail.capMs, d.tail.scaleMs / Math.pow(Math.max(rand(), 1e-12), 1 / d.tail.alpha));
  return ms;
}

let defaultFrames: Uint8Array[] | null = null;
function syntheticFrames(): Uint8Array[] {
  if (defaultFrames) return defaultFrames;
  const colours = [
    [230, 25, 75],
    [60, 180, 75],
    [67, 99, 216],
    [255, 225, 25],
    [245, 130, 49],
    [145, 30, 180],
    [66, 212, 244],
    [0, 0, 0],
  ];
  defaultFrames = colours.map(([r, g, b], i) => {
    const png = new PNG({ width: 160, height: 160 });
    png.data.fill(255);
    // A coloured block at a different place per frame: cheap, and not all frames hash the same.
    for (let y = 0; y < 40; y++)
      for (let x = 0; x < 40; x++) {
        const o = ((y + (i % 4) * 30) * 160 + x + Math.floor(i / 4) * 60) * 4;
        png.data[o] = r ?? 0;
        png.data[o + 1] = g ?? 0;
        png.data[o + 2] = b ?? 0;
      }
    return new Uint8Array(PNG.sync.write(png));
  });
  return defaultFrames;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

export class SimulatedEnv implements GuiEnv {
  readonly kind = 'simulated';
  private readonly rand: () => number;
  private readonly frames: Uint8Array[];
  private path: number[] = [];
  private progress = 0;
  private stepCount = 0;
  private seed = 0;
  private done = false;
  private agentEnded = false;
  private crashed = false;
  private fields: string[] = [];

  constructor(
    readonly id: string,
    private readonly opts: SimulatedEnvOptions
  ) {
    let h = opts.seed ?? 1;
    for (const ch of id) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
    this.rand = rng32(h);
    this.frames = opts.observations?.length ? opts.observations : syntheticFrames();
  }

  get broken(): boolean {
    return this.crashed;
  }

  private wait(d: LatencyDist): Promise<void> {
    return sleep(sampleLatency(d, this.rand) * (this.opts.timeScale ?? 1));
  }

  private frame(): Observation {
    const png = this.frames[(this.seed + this.stepCount) % this.frames.length] ?? new Uint8Array();
    return { png, width: 160, height: 160 };
  }

  async reset(task: TaskSpec, seed: number): Promise<ResetResult> {
    if (this.crashed) throw new EnvCrashedError(`${this.id}: simulated env crashed`, this.id);
    await this.wait(this.opts.profile.reset);
    const r = rng32(seed ^ 0x2545f491);
    this.path = Array.from({ length: 1 + Math.floor(r() * Math.min(3, task.tier + 1)) }, () => Math.floor(r() * 256));
    this.progress = 0;
    this.stepCount = 0;
    this.seed = seed;
    this.done = false;
    this.agentEnded = false;
    this.fields = [`target-${seed % 97}`];
    return {
      instruction: `${task.instruction} [simulated seed ${seed}]`,
      fields: this.fields,
      observation: this.frame(),
    };
  }

  async observe(): Promise<Observation> {
    await this.wait(this.opts.profile.observe);
    return this.frame();
  }

  async step(action: CanonicalAction): Promise<StepResult> {
    await this.wait(this.opts.profile.step);
    if (this.rand() < this.opts.profile.crashProb) {
      this.crashed = true;
      throw new EnvCrashedError(`${this.id}: simulated crash`, this.id);
    }
    this.stepCount++;
    if (action.type === 'finished' || action.type === 'call_user') this.agentEnded = true;
    if (action.type === 'click') {
      const cell = Math.min(15, Math.floor(action.y * 16)) * 16 + Math.min(15, Math.floor(action.x * 16));
      if (cell === this.path[this.progress]) this.progress++;
      if (this.progress >= this.path.length) this.done = true;
    }
    return { done: this.done || this.agentEnded, actionOk: true };
  }

  async evaluate(): Promise<EvalResult> {
    const m = this.opts.rewardModel ?? { kind: 'path' };
    if (m.kind === 'bernoulli') return { reward: this.rand() < m.p ? 1 : 0, done: true, reason: 'bernoulli' };
    return {
      reward: this.done ? 1 : 0,
      done: this.done || this.agentEnded,
      reason: this.done ? 'path completed' : 'path incomplete',
    };
  }

  async oracle(): Promise<CanonicalAction | null> {
    if (this.done) return null;
    const cell = this.path[this.progress] ?? 0;
    return { type: 'click', x: ((cell % 16) + 0.5) / 16, y: (Math.floor(cell / 16) + 0.5) / 16 };
  }

  async close(): Promise<void> {
    /* nothing to free */
  }
}

export interface SimulatedPoolOptions extends SimulatedEnvOptions {
  slots: number;
}

export class SimulatedEnvPool extends SlotPool<SimulatedEnv> {
  constructor(opts: SimulatedPoolOptions) {
    super(
      'simulated',
      opts.slots,
      (id) => new SimulatedEnv(id, opts),
      (e) => e.broken
    );
  }
}
