/**
 * vLLM's own server-side figures on the VLM policy server's endpoint. vLLM serves Prometheus metrics on
 * its /metrics (request latency end to end, time in its queue, prefill and decode, time to first token,
 * inter-token latency, tokens, running / waiting requests, KV-cache use). The VLM policy server process
 * reads that page at each scrape of its own endpoint (it already does, for the queue depth) and re-exports
 * a chosen set under `dartflow_vllm_*` with its `server_id`, summed over vLLM's engines and served model
 * names: one Prometheus target per policy server, also when vLLM listens on a loopback port nobody else
 * reaches, and one dashboard for embedded and vLLM policy servers.
 *
 * Values are vLLM's, unchanged (cumulative histogram buckets, counters that restart with vLLM: rate()
 * handles the reset). When vLLM does not answer, `dartflow_vllm_up` is 0 and the mirrored families have
 * no samples, rather than the last values shown as current.
 */
import { type MetricsRegistry } from './registry';

/** One sample of a Prometheus text exposition. */
export interface ExpositionSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$/;
const LABEL_PAIR_RE = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/y;

function unescapeLabel(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function parseValue(v: string): number {
  if (v === '+Inf' || v === 'Inf') return Infinity;
  if (v === '-Inf') return -Infinity;
  if (v === 'NaN') return NaN;
  return Number(v);
}

/** Parses the text exposition format (0.0.4, as prometheus_client writes it); lines it cannot read are skipped. */
export function parseExpositionText(text: string): ExpositionSample[] {
  const out: ExpositionSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE_RE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    const body = m[3] ?? '';
    LABEL_PAIR_RE.lastIndex = 0;
    let ok = true;
    while (LABEL_PAIR_RE.lastIndex < body.length) {
      const at = LABEL_PAIR_RE.lastIndex;
      const p = LABEL_PAIR_RE.exec(body);
      if (!p || LABEL_PAIR_RE.lastIndex === at) {
        ok = body.slice(at).trim() === '';
        break;
      }
      labels[p[1]!] = unescapeLabel(p[2]!);
    }
    const value = parseValue(m[4]!);
    // A value that is not a number (and not spelled NaN) is a line this parser does not understand.
    if (ok && (!Number.isNaN(value) || m[4] === 'NaN')) out.push({ name: m[1]!, labels, value });
  }
  return out;
}

export interface VllmMirror {
  /** The dartflow family. */
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  /** vLLM's family names, newest first (the first one present is used: names changed across versions). */
  from: string[];
  help: string;
  /** vLLM labels kept (besides le); the others (model_name, engine) are summed over. */
  keep?: string[];
  /** How several vLLM series (engines) combine: summed, or the largest (a usage fraction). */
  combine?: 'sum' | 'max';
}

/**
 * What is re-exported. Names from vLLM's V1 engine (vllm/v1/metrics/loggers.py, vLLM 0.8 – 0.32);
 * the older names are fallbacks for the V0 engine.
 */
export const VLLM_MIRRORS: readonly VllmMirror[] = [
  {
    name: 'dartflow_vllm_e2e_request_latency_seconds',
    type: 'histogram',
    from: ['vllm:e2e_request_latency_seconds'],
    help: "vLLM's end-to-end request latency (arrival in vLLM to last token), as vLLM measures it",
  },
  {
    name: 'dartflow_vllm_request_queue_seconds',
    type: 'histogram',
    from: ['vllm:request_queue_time_seconds'],
    help: "Time requests waited in vLLM's scheduler queue (WAITING)",
  },
  {
    name: 'dartflow_vllm_request_inference_seconds',
    type: 'histogram',
    from: ['vllm:request_inference_time_seconds'],
    help: 'Time requests spent being computed in vLLM (RUNNING: prefill + decode)',
  },
  {
    name: 'dartflow_vllm_request_prefill_seconds',
    type: 'histogram',
    from: ['vllm:request_prefill_time_seconds'],
    help: 'Prefill time of requests in vLLM (prompt, screenshot tokens)',
  },
  {
    name: 'dartflow_vllm_request_decode_seconds',
    type: 'histogram',
    from: ['vllm:request_decode_time_seconds'],
    help: 'Decode time of requests in vLLM (the generated action text)',
  },
  {
    name: 'dartflow_vllm_time_to_first_token_seconds',
    type: 'histogram',
    from: ['vllm:time_to_first_token_seconds'],
    help: 'Time to the first generated token in vLLM',
  },
  {
    name: 'dartflow_vllm_inter_token_latency_seconds',
    type: 'histogram',
    from: ['vllm:inter_token_latency_seconds', 'vllm:time_per_output_token_seconds'],
    help: 'Time between generated tokens in vLLM',
  },
  {
    name: 'dartflow_vllm_prompt_tokens_total',
    type: 'counter',
    from: ['vllm:prompt_tokens_total'],
    help: 'Prompt (prefill) tokens vLLM processed',
  },
  {
    name: 'dartflow_vllm_generation_tokens_total',
    type: 'counter',
    from: ['vllm:generation_tokens_total'],
    help: 'Tokens vLLM generated',
  },
  {
    name: 'dartflow_vllm_requests_finished_total',
    type: 'counter',
    from: ['vllm:request_success_total'],
    help: 'Requests vLLM finished, by finish reason (stop, length, abort)',
    keep: ['finished_reason'],
  },
  {
    name: 'dartflow_vllm_preemptions_total',
    type: 'counter',
    from: ['vllm:num_preemptions_total'],
    help: 'Requests vLLM preempted (KV cache full)',
  },
  {
    name: 'dartflow_vllm_requests_running',
    type: 'gauge',
    from: ['vllm:num_requests_running'],
    help: "Requests in vLLM's running batch at scrape time",
  },
  {
    name: 'dartflow_vllm_requests_waiting',
    type: 'gauge',
    from: ['vllm:num_requests_waiting'],
    help: "Requests in vLLM's waiting queue at scrape time",
  },
  {
    name: 'dartflow_vllm_kv_cache_usage_ratio',
    type: 'gauge',
    from: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    help: "vLLM's KV-cache use (1 = full), the fullest engine",
    combine: 'max',
  },
];

type MirrorSample = { suffix: string; labels: Record<string, string>; value: number };

/** One mirror's samples from a parsed vLLM exposition, combined over the labels it does not keep. */
export function mirrorSamples(mirror: VllmMirror, samples: readonly ExpositionSample[]): MirrorSample[] {
  const suffixes = mirror.type === 'histogram' ? ['_bucket', '_sum', '_count'] : [''];
  const source = mirror.from.find((f) => samples.some((s) => suffixes.some((x) => s.name === f + x)));
  if (!source) return [];
  const combined = new Map<string, MirrorSample>();
  for (const s of samples) {
    const suffix = suffixes.find((x) => s.name === source + x);
    if (suffix === undefined) continue;
    const labels: Record<string, string> = {};
    for (const k of mirror.keep ?? []) labels[k] = s.labels[k] ?? '';
    if (suffix === '_bucket') labels.le = s.labels.le ?? '+Inf';
    const key = `${suffix}${JSON.stringify(labels)}`;
    const prev = combined.get(key);
    if (!prev) combined.set(key, { suffix, labels, value: s.value });
    else prev.value = mirror.combine === 'max' ? Math.max(prev.value, s.value) : prev.value + s.value;
  }
  return [...combined.values()];
}

/** Sum of one metric's samples (e.g. vLLM's `vllm:num_requests_waiting` over its engines). */
const sumOf = (samples: readonly ExpositionSample[], name: string): number | undefined =>
  samples.filter((s) => s.name === name).reduce<number | undefined>((a, s) => (a ?? 0) + s.value, undefined);

/**
 * Registers the `dartflow_vllm_*` families for one VLM policy server and returns the reader of vLLM's
 * /metrics: `refresh` (a scrape-time refresher: reads the page, at most `timeoutMs`) and `depth` (requests
 * waiting in vLLM, for dartflow_policy_queue_depth), used by workers/vllm-policy-server.ts.
 */
export function vllmServerMetrics(
  registry: MetricsRegistry,
  serverId: string,
  baseUrl: string,
  apiKey?: string,
  opts: { timeoutMs?: number } = {}
): { depth: () => number; refresh: () => Promise<void>; up: () => boolean } {
  let last: ExpositionSample[] = [];
  let up = false;
  let depth = 0;
  registry
    .gauge('dartflow_vllm_up', "1 when vLLM's /metrics answered at the last scrape, else 0", ['server_id'])
    .collect(() => [{ labels: { server_id: serverId }, value: up ? 1 : 0 }]);
  for (const m of VLLM_MIRRORS) {
    registry
      .mirrored(m.name, m.help, ['server_id', ...(m.keep ?? [])], m.type)
      .collect(() =>
        up ? mirrorSamples(m, last).map((s) => ({ ...s, labels: { ...s.labels, server_id: serverId } })) : []
      );
  }
  return {
    depth: () => depth,
    up: () => up,
    refresh: async () => {
      try {
        const res = await fetch(`${baseUrl.replace(/\/+$/, '')}/metrics`, {
          signal: AbortSignal.timeout(opts.timeoutMs ?? 2000),
          ...(apiKey ? { headers: { authorization: `Bearer ${apiKey}` } } : {}),
        });
        if (!res.ok) {
          await res.body?.cancel();
          up = false;
          return;
        }
        last = parseExpositionText(await res.text());
        up = true;
        depth = sumOf(last, 'vllm:num_requests_waiting') ?? depth;
      } catch {
        up = false;
      }
    },
  };
}
