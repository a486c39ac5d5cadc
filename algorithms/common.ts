/**
 * Shared helpers of the pure algorithm modules: typed errors, finiteness checks, option defaults.
 * Node-free (workflows import these modules): plain TypeScript only.
 */

/**
 * A NaN or ±Infinity reached an algorithm. We refuse instead of training on it: one NaN reward or
 * log-prob turns every advantage / gradient of the batch into NaN and silently destroys the weights.
 */
export class NonFiniteValueError extends Error {
  override readonly name = 'NonFiniteValueError';
  constructor(
    /** Which input held the value (e.g. "reward", "logp"). */
    readonly field: string,
    /** Index of the offending element, or -1 for a scalar. */
    readonly index: number,
    readonly value: number
  ) {
    super(`${field}${index >= 0 ? `[${index}]` : ''} is not finite (${String(value)}); refusing to train on it`);
  }
}

/** An argument or option outside its domain (negative counts, clip ε ≥ 1, mismatched lengths, …). */
export class InvalidArgumentError extends Error {
  override readonly name = 'InvalidArgumentError';
}

export function assertFinite(value: number, field: string, index = -1): void {
  if (!Number.isFinite(value)) throw new NonFiniteValueError(field, index, value);
}

export function assertAllFinite(values: ArrayLike<number>, field: string): void {
  for (let i = 0; i < values.length; i++) assertFinite(values[i] as number, field, i);
}

export function assertNonNegativeInteger(value: number, field: string): void {
  if (!Number.isInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${field} must be a non-negative integer, got ${String(value)}`);
  }
}

/**
 * Merge caller options over defaults, ignoring keys the caller set to `undefined` (a plain spread would
 * let `{ clipLow: undefined }` erase the default).
 */
export function withDefaults<T extends object>(defaults: T, options: Partial<T> | undefined): T {
  const merged = { ...defaults };
  if (options) {
    for (const key of Object.keys(defaults) as (keyof T)[]) {
      const value = options[key];
      if (value !== undefined) merged[key] = value as T[keyof T];
    }
  }
  return merged;
}

/** Clamp x into [lo, hi]. */
export function clamp(x: number, lo: number, hi: number): number {
  return x < lo ? lo : x > hi ? hi : x;
}
