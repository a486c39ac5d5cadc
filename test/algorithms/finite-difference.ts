/** Central finite differences for checking analytic derivatives in the algorithm tests. */
import assert from 'node:assert/strict';

/** (f(x + h) − f(x − h)) / 2h: error O(h²) for smooth f. */
export function centralDifference(f: (x: number) => number, x: number, h = 1e-6): number {
  return (f(x + h) - f(x - h)) / (2 * h);
}

/** Assert |analytic − numeric| ≤ tol·max(1, |numeric|). */
export function assertDerivative(
  analytic: number,
  f: (x: number) => number,
  x: number,
  label: string,
  tol = 1e-6
): void {
  const numeric = centralDifference(f, x);
  const scale = Math.max(1, Math.abs(numeric));
  assert.ok(
    Math.abs(analytic - numeric) <= tol * scale,
    `${label}: analytic ${analytic} vs numeric ${numeric} at x = ${x}`
  );
}

export function assertClose(actual: number, expected: number, label = '', tol = 1e-9): void {
  assert.ok(Math.abs(actual - expected) <= tol * Math.max(1, Math.abs(expected)), `${label}: ${actual} ≠ ${expected}`);
}
