/**
 * A tiny seeded PRNG (mulberry32) for curation decisions that must replay identically: Temporal workflows
 * may not use Math.random, and tests need fixed draws. Its whole state is one uint32, so a workflow can
 * carry it across continue-as-new (`createPrng(rng.state())` resumes the same sequence).
 * Not cryptographic; 2^32 period is plenty for picking trajectories.
 */
import { InvalidArgumentError } from './common';

export interface Prng {
  /** Uniform float in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n) for a positive integer n. */
  nextInt(n: number): number;
  /** The current state; `createPrng(state)` continues the sequence from here. */
  state(): number;
}

/** 32-bit FNV-1a hash: turns a string seed (e.g. a group id) into a numeric one. */
export function hashSeed(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Seed with an integer (used modulo 2^32) or a string (hashed with FNV-1a). */
export function createPrng(seed: number | string): Prng {
  if (typeof seed === 'number' && !Number.isInteger(seed)) {
    throw new InvalidArgumentError(`PRNG seed must be an integer or a string, got ${String(seed)}`);
  }
  let a = typeof seed === 'string' ? hashSeed(seed) : seed >>> 0;
  const next = (): number => {
    // mulberry32 (Tommy Ettinger): one add, three xorshift-multiply rounds.
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    nextInt(n: number): number {
      if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`nextInt needs a positive integer, got ${n}`);
      return Math.floor(next() * n);
    },
    state: () => a,
  };
}

/** Fisher–Yates shuffle of a copy; the input is left untouched. */
export function shuffled<T>(items: readonly T[], rng: Prng): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.nextInt(i + 1);
    const tmp = out[i] as T;
    out[i] = out[j] as T;
    out[j] = tmp;
  }
  return out;
}
