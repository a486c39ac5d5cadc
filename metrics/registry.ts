/**
 * A small Prometheus registry (text exposition format 0.0.4): counters, gauges and histograms with
 * labels, rendered on each scrape. Pure and I/O-free, so it is unit-tested by its output.
 *
 * Why not the Temporal Runtime's metricMeter (which would put these on Core's exporter directly): its
 * gauges refuse negative values ("MetricGauge value must be non-negative"; a PPO loss is often < 0),
 * it has no read-at-scrape gauges (busy slots, queue depth are exact only at scrape time), and its
 * exporter goes away with the Runtime when the last worker closes. metrics/server.ts serves this
 * registry and Core's own exposition on one port instead.
 */

export type Labels = Record<string, string>;
type Sample = { labels: Labels; value: number };

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Prometheus number syntax: NaN, +Inf and -Inf are spelled out. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const escapeHelp = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

/** A stable key for a label set (label order as declared). */
const keyOf = (names: readonly string[], labels: Labels): string => JSON.stringify(names.map((n) => labels[n] ?? ''));

abstract class Family<L extends string> {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    readonly type: 'counter' | 'gauge' | 'histogram'
  ) {
    if (!NAME_RE.test(name)) throw new Error(`invalid metric name "${name}"`);
    for (const l of labelNames)
      if (!LABEL_RE.test(l) || l.startsWith('__') || l === 'le')
        throw new Error(`invalid label name "${l}" on metric ${name}`);
  }

  /** Every declared label present (missing ones become ""), nothing undeclared: a typo is an error, not a new series. */
  protected check(labels: Partial<Record<L, string>>): Labels {
    const out: Labels = {};
    for (const l of this.labelNames) out[l] = String(labels[l] ?? '');
    for (const k of Object.keys(labels))
      if (!(this.labelNames as readonly string[]).includes(k))
        throw new Error(`metric ${this.name} has no label "${k}"`);
    return out;
  }

  abstract samples(): Array<{ suffix: string; labels: Labels; value: number }>;

  /** Sample names this family writes (histograms: _bucket, _sum, _count). */
  sampleNames(): string[] {
    return this.type === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => this.name + s) : [this.name];
  }
}

export class Counter<L extends string = never> extends Family<L> {
  private readonly values = new Map<string, Sample>();
  constructor(name: string, help: string, labelNames: readonly L[] = []) {
    super(name, help, labelNames, 'counter');
  }
  inc(labels: Partial<Record<L, string>> = {}, by = 1): void {
    if (!(by >= 0)) throw new Error(`counter ${this.name} can only go up (got ${by})`);
    const l = this.check(labels);
    const k = keyOf(this.labelNames, l);
    const s = this.values.get(k) ?? { labels: l, value: 0 };
    s.value += by;
    this.values.set(k, s);
  }
  get(labels: Partial<Record<L, string>> = {}): number {
    return this.values.get(keyOf(this.labelNames, this.check(labels)))?.value ?? 0;
  }
  samples() {
    return [...this.values.values()].map((s) => ({ suffix: '', ...s }));
  }
}

export class Gauge<L extends string = never> extends Family<L> {
  private readonly values = new Map<string, Sample>();
  /** Read at scrape time instead of set: the value is exact when Prometheus asks. */
  private collector?: () => Array<{ labels: Partial<Record<L, string>>; value: number }>;
  constructor(name: string, help: string, labelNames: readonly L[] = []) {
    super(name, help, labelNames, 'gauge');
  }
  set(labels: Partial<Record<L, string>>, value: number): void {
    const l = this.check(labels);
    this.values.set(keyOf(this.labelNames, l), { labels: l, value });
  }
  /** Drops one series (e.g. a campaign no longer served). */
  remove(labels: Partial<Record<L, string>>): void {
    this.values.delete(keyOf(this.labelNames, this.check(labels)));
  }
  collect(fn: () => Array<{ labels: Partial<Record<L, string>>; value: number }>): this {
    this.collector = fn;
    return this;
  }
  get(labels: Partial<Record<L, string>> = {}): number | undefined {
    return this.values.get(keyOf(this.labelNames, this.check(labels)))?.value;
  }
  samples() {
    const set = [...this.values.values()].map((s) => ({ suffix: '', ...s }));
    if (!this.collector) return set;
    let collected: Array<{ labels: Partial<Record<L, string>>; value: number }>;
    try {
      collected = this.collector();
    } catch {
      collected = []; // a failing read must not break the whole scrape
    }
    return [...set, ...collected.map((c) => ({ suffix: '', labels: this.check(c.labels), value: c.value }))];
  }
}

export class Histogram<L extends string = never> extends Family<L> {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  readonly buckets: readonly number[];
  constructor(name: string, help: string, labelNames: readonly L[], buckets: readonly number[]) {
    super(name, help, labelNames, 'histogram');
    if (buckets.length === 0 || buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]!)))
      throw new Error(`histogram ${name}: buckets must be finite and strictly increasing`);
    this.buckets = buckets;
  }
  observe(labels: Partial<Record<L, string>>, value: number): void {
    if (!Number.isFinite(value)) return; // a NaN latency is a bug elsewhere; it must not poison _sum
    const l = this.check(labels);
    const k = keyOf(this.labelNames, l);
    let s = this.series.get(k);
    if (!s) {
      s = { labels: l, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(k, s);
    }
    // Cumulative buckets are built at render time; here each value lands in its first bucket only.
    const i = this.buckets.findIndex((b) => value <= b);
    if (i >= 0) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }
  count(labels: Partial<Record<L, string>> = {}): number {
    return this.series.get(keyOf(this.labelNames, this.check(labels)))?.count ?? 0;
  }
  samples() {
    const out: Array<{ suffix: string; labels: Labels; value: number }> = [];
    for (const s of this.series.values()) {
      let cum = 0;
      this.buckets.forEach((b, i) => {
        cum += s.counts[i]!;
        out.push({ suffix: '_bucket', labels: { ...s.labels, le: formatValue(b) }, value: cum });
      });
      out.push({ suffix: '_bucket', labels: { ...s.labels, le: '+Inf' }, value: s.count });
      out.push({ suffix: '_sum', labels: s.labels, value: s.sum });
      out.push({ suffix: '_count', labels: s.labels, value: s.count });
    }
    return out;
  }
}

/**
 * A family whose samples are all read at scrape time, suffixes included (e.g. another server's histogram
 * re-exported: its `_bucket`/`_sum`/`_count` samples as that server counted them).
 */
export class Mirrored<L extends string = never> extends Family<L> {
  private collector: () => Array<{ suffix: string; labels: Partial<Record<L, string>>; value: number }> = () => [];
  constructor(name: string, help: string, labelNames: readonly L[], type: 'counter' | 'gauge' | 'histogram') {
    super(name, help, labelNames, type);
  }
  collect(fn: () => Array<{ suffix: string; labels: Partial<Record<L, string>>; value: number }>): this {
    this.collector = fn;
    return this;
  }
  samples() {
    let collected: Array<{ suffix: string; labels: Partial<Record<L, string>>; value: number }>;
    try {
      collected = this.collector();
    } catch {
      collected = []; // a failing read must not break the whole scrape
    }
    const allowed = new Set(this.type === 'histogram' ? ['_bucket', '_sum', '_count'] : ['']);
    return collected
      .filter((c) => allowed.has(c.suffix))
      .map((c) => {
        const { le, ...rest } = c.labels as Record<string, string | undefined>;
        const labels = this.check(rest as Partial<Record<L, string>>);
        return {
          suffix: c.suffix,
          labels: c.suffix === '_bucket' && le !== undefined ? { ...labels, le } : labels,
          value: c.value,
        };
      });
  }
}

/** Exponential buckets: start, start·factor, … (count of them). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => Number((start * factor ** i).toPrecision(6)));
}

export class MetricsRegistry {
  private readonly families = new Map<string, Family<string>>();
  /** `constLabels` go on every sample (e.g. the process's role). */
  constructor(private readonly constLabels: Labels = {}) {
    for (const l of Object.keys(constLabels)) if (!LABEL_RE.test(l)) throw new Error(`invalid label name "${l}"`);
  }

  private add<F extends Family<string>>(f: F): F {
    if (this.families.has(f.name)) throw new Error(`metric ${f.name} is registered twice`);
    this.families.set(f.name, f);
    return f;
  }
  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return this.add(new Counter<L>(name, help, labelNames));
  }
  gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
    return this.add(new Gauge<L>(name, help, labelNames));
  }
  histogram<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[],
    buckets: readonly number[]
  ): Histogram<L> {
    return this.add(new Histogram<L>(name, help, labelNames, buckets));
  }

  /** A family read whole at scrape time (Mirrored). */
  mirrored<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[],
    type: 'counter' | 'gauge' | 'histogram'
  ): Mirrored<L> {
    return this.add(new Mirrored<L>(name, help, labelNames, type));
  }

  /** Names of every family registered (what a dashboard may query). */
  familyNames(): string[] {
    return [...this.families.keys()].sort();
  }

  /** The exposition text; families without samples write only their HELP and TYPE lines. */
  render(): string {
    const lines: string[] = [];
    for (const f of this.families.values()) {
      lines.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
      for (const s of f.samples())
        lines.push(`${f.name}${s.suffix}${labelText({ ...s.labels, ...this.constLabels })} ${formatValue(s.value)}`);
    }
    return lines.length ? `${lines.join('\n')}\n` : '';
  }
}
