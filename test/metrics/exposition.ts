/** Test helpers: scrape an endpoint and read the Prometheus text format back into samples. */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = SAMPLE_RE.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL_RE))
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    const raw = m[3]!;
    out.push({ name: m[1]!, labels, value: raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw) });
  }
  return out;
}

/** Sum of the samples named `name` whose labels include `match`. */
export function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

export function has(samples: Sample[], name: string): boolean {
  return samples.some((s) => s.name === name);
}

export async function scrape(url: string): Promise<Sample[]> {
  return parseExposition(await scrapeText(url));
}

/** Sample names an exposition declares with `# TYPE` (histograms: _bucket, _sum, _count), with or without samples yet. */
export function declaredNames(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    if (type === 'histogram') out.push(`${name}_bucket`, `${name}_sum`, `${name}_count`);
    else out.push(name);
  }
  return out;
}

export async function scrapeText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res.text();
}
