/**
 * Policy-server metrics, observed without touching the serving code: a second 'request' listener on the
 * HTTP server times each act request end to end, the engine's onBatch hook reports batch size and
 * compute time, and gauges read the batcher's queue and the served version at scrape time. The version
 * lag is the newest checkpoint in the store minus the served version, read at most every few seconds.
 */
import type http from 'node:http';
import type { BatchEvent } from '../rollout/batcher';
import { exponentialBuckets, type MetricsRegistry } from './registry';

/** What the policy metrics read from a server (the embedded engine or the vLLM front). */
export interface ServedSource {
  served(): { campaignId: string | null; version: number } | undefined;
  /** Requests waiting for a batch (embedded) or held at the serving gate (vLLM). */
  queueDepth(): number;
  inFlight(): number;
}

export interface PolicyMetrics {
  onBatch(e: BatchEvent): void;
  /** Times every POST /v1/act (or /v1/chat/completions) request this server answers. */
  observeHttp(server: http.Server): void;
  /** Gauges for the served version, queue depth and version lag; returns the scrape-time refresher. */
  watch(source: ServedSource, latestVersion: (campaignId: string) => Promise<number | undefined>): () => Promise<void>;
}

const ACT_PATHS = new Set(['/v1/act', '/v1/chat/completions']);

export function createPolicyMetrics(registry: MetricsRegistry, serverId: string): PolicyMetrics {
  const requestSeconds = registry.histogram(
    'dartflow_policy_request_seconds',
    'Act requests answered by this policy server: arrival to response sent (queueing + batch + inference)',
    ['server_id', 'code'],
    exponentialBuckets(0.0005, 2, 18)
  );
  const batchSize = registry.histogram(
    'dartflow_policy_batch_size',
    'Observations per inference batch',
    ['server_id'],
    [1, 2, 4, 8, 16, 32, 64, 128, 256]
  );
  const batchSeconds = registry.histogram(
    'dartflow_policy_batch_seconds',
    'Inference time of one batch (the backend call)',
    ['server_id'],
    exponentialBuckets(0.0001, 2, 18)
  );
  const batchErrors = registry.counter('dartflow_policy_batch_errors_total', 'Batches whose inference failed', [
    'server_id',
  ]);
  const queueDepth = registry.gauge(
    'dartflow_policy_queue_depth',
    'Requests waiting in the batch queue (vLLM: held at the serving gate) now',
    ['server_id']
  );
  const inFlight = registry.gauge('dartflow_policy_in_flight', 'Requests being computed now', ['server_id']);
  const servedVersion = registry.gauge('dartflow_policy_served_version', 'Checkpoint version this server serves', [
    'server_id',
    'campaign',
  ]);
  const latest = registry.gauge(
    'dartflow_policy_latest_version',
    'Newest checkpoint version of the served campaign in the store',
    ['server_id', 'campaign']
  );
  const lag = registry.gauge(
    'dartflow_policy_version_lag',
    'Newest checkpoint version minus the served one (0 = up to date)',
    ['server_id', 'campaign']
  );
  return {
    onBatch(e) {
      batchSize.observe({ server_id: serverId }, e.size);
      batchSeconds.observe({ server_id: serverId }, e.ms / 1000);
      if (e.error !== undefined) batchErrors.inc({ server_id: serverId });
    },
    observeHttp(server) {
      server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
        const path = (req.url ?? '').split('?')[0] ?? '';
        if (req.method !== 'POST' || !ACT_PATHS.has(path)) return;
        const t0 = performance.now();
        res.once('close', () =>
          requestSeconds.observe(
            { server_id: serverId, code: res.writableFinished ? String(res.statusCode) : 'aborted' },
            (performance.now() - t0) / 1000
          )
        );
      });
    },
    watch(source, latestVersion) {
      queueDepth.collect(() => [{ labels: { server_id: serverId }, value: source.queueDepth() }]);
      inFlight.collect(() => [{ labels: { server_id: serverId }, value: source.inFlight() }]);
      const labelsNow = () => {
        const s = source.served();
        return s ? { server_id: serverId, campaign: s.campaignId ?? '' } : undefined;
      };
      servedVersion.collect(() => {
        const s = source.served();
        return s && labelsNow() ? [{ labels: labelsNow()!, value: s.version }] : [];
      });
      // The newest version is listed from the store: cached briefly so frequent scrapes do not list it each time.
      let cached: { campaignId: string; version: number; at: number } | undefined;
      const refresh = async () => {
        const s = source.served();
        if (!s?.campaignId) return;
        if (cached?.campaignId === s.campaignId && performance.now() - cached.at < 5000) return;
        const v = await latestVersion(s.campaignId);
        if (v !== undefined) cached = { campaignId: s.campaignId, version: v, at: performance.now() };
      };
      const current = () => {
        const s = source.served();
        return s?.campaignId && cached?.campaignId === s.campaignId
          ? { s, latest: Math.max(cached.version, s.version) }
          : undefined;
      };
      latest.collect(() => {
        const c = current();
        return c ? [{ labels: { server_id: serverId, campaign: c.s.campaignId! }, value: c.latest }] : [];
      });
      lag.collect(() => {
        const c = current();
        return c ? [{ labels: { server_id: serverId, campaign: c.s.campaignId! }, value: c.latest - c.s.version }] : [];
      });
      return refresh;
    },
  };
}

/** Sum of one metric's samples in a Prometheus text exposition (e.g. vLLM's `vllm:num_requests_waiting`). */
export function sumOfSamples(text: string, name: string): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue; // another metric with this prefix
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) sum = (sum ?? 0) + v;
  }
  return sum;
}
