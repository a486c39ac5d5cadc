/**
 * HTML building with escaping by default: every value interpolated into `html\`...\`` is escaped unless it
 * is already `Html` (built by this module). Trajectory data holds model output and task text, which are
 * attacker-controlled as far as the viewer is concerned, so nothing reaches a page unescaped by accident.
 */

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content and quoted attribute values alike. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Marks trusted markup (generated SVG, already-built fragments) as not needing escaping. */
export const raw = (markup: string): Html => new Html(markup);

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** A URL path from segments, each percent-encoded (ids may hold "=" or "."; never a raw "/"). */
export function href(...segments: Array<string | number>): string {
  return '/' + segments.map((s) => encodeURIComponent(String(s))).join('/');
}

/** Numbers for tables: finite values with a few significant digits, "—" otherwise. */
export function num(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  if (Number.isInteger(value)) return String(value);
  return String(Number(value.toPrecision(digits)));
}

export const pct = (value: number | null | undefined): string =>
  value === null || value === undefined || !Number.isFinite(value) ? '—' : `${(value * 100).toFixed(1)} %`;

export const isoTime = (ms: number | null | undefined): string =>
  ms === null || ms === undefined || !Number.isFinite(ms) ? '—' : new Date(ms).toISOString().replace('.000Z', 'Z');
