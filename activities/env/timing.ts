/**
 * EpisodeClock: where an episode's time goes inside the env activity (env operations, policy calls,
 * storage), recorded in the trajectory manifest for the efficiency and overhead benchmarks.
 */
import type { EpisodeTiming } from '../../schemas/records';

export class EpisodeClock {
  private readonly queuedAt: number;
  private acquiredAt: number;
  private writeStartedAt = 0;
  private readonly intervals: Array<[number, number]> = [];
  private envMs = 0;
  private actMs = 0;
  private actCalls = 0;
  private uploadWaitMs = 0;
  private stepsWriteMs = 0;

  constructor(private readonly now: () => number = Date.now) {
    this.queuedAt = now();
    this.acquiredAt = this.queuedAt;
  }

  acquired(): void {
    this.acquiredAt = this.now();
  }

  writeStarted(): void {
    this.writeStartedAt = this.now();
  }

  private async timed<T>(fn: () => Promise<T>, done: (start: number, end: number) => void): Promise<T> {
    const start = this.now();
    try {
      return await fn();
    } finally {
      done(start, this.now());
    }
  }

  /** An env operation (reset, step, observe, evaluate); back-to-back operations form one interval. */
  env<T>(fn: () => Promise<T>): Promise<T> {
    return this.timed(fn, (start, end) => {
      this.envMs += end - start;
      const last = this.intervals.at(-1);
      if (last && start - last[1] <= 1) last[1] = end;
      else this.intervals.push([start, end]);
    });
  }

  /** A policy call (creating the episode policy, or one act()). */
  act<T>(fn: () => Promise<T>): Promise<T> {
    return this.timed(fn, (start, end) => {
      this.actMs += end - start;
      this.actCalls++;
    });
  }

  uploads<T>(p: Promise<T>): Promise<T> {
    return this.timed(
      () => p,
      (start, end) => (this.uploadWaitMs += end - start)
    );
  }

  stepsWrite<T>(p: Promise<T>): Promise<T> {
    return this.timed(
      () => p,
      (start, end) => (this.stepsWriteMs += end - start)
    );
  }

  record(): EpisodeTiming {
    return {
      queuedAt: this.queuedAt,
      acquiredAt: this.acquiredAt,
      envIntervals: this.intervals.map(([a, b]) => [a, b] as [number, number]),
      envMs: this.envMs,
      actMs: this.actMs,
      actCalls: this.actCalls,
      uploadWaitMs: this.uploadWaitMs,
      stepsWriteMs: this.stepsWriteMs,
      writeStartedAt: this.writeStartedAt || this.now(),
      writesParallel: true,
    };
  }
}
