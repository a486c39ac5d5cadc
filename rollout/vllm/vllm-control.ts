/**
 * The calls dartflow makes to one vLLM server besides inference: health, full-weight reload (pause →
 * collective_rpc reload_weights → resume, infra/vllm.ts) and in-place LoRA load. The same for a server
 * dartflow started and for a user's own vLLM on a GPU machine (which must run with VLLM_SERVER_DEV_MODE=1
 * for full reloads, or --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True for adapters, and must see
 * the checkpoint folders this process downloads: same machine or a shared file system).
 */
import { reloadWeights, vllmHealth, vllmHealthy } from '../../infra/vllm';

export interface VllmControl {
  /** http://host:port, without /v1. */
  readonly baseUrl: string;
  /** --served-model-name of the server (the base model's name in requests). */
  readonly servedModelName: string;
  /** Set when the server runs with --enable-lora (and its --max-lora-rank). */
  readonly lora?: { maxRank: number };
  /** Sent as a bearer token on /v1 requests when the user's vLLM runs with --api-key. */
  readonly apiKey?: string;
  healthy(timeoutMs?: number): Promise<boolean>;
  /** /health in three states; 'slow': no answer in time (busy, not down). */
  health(timeoutMs?: number): Promise<'up' | 'down' | 'slow'>;
  reloadWeights(dir: string): Promise<void>;
  loadLora(name: string, dir: string, inPlace: boolean): Promise<void>;
}

/** vLLM answered a control call with an error status (it is up and refused): not a transport failure. */
export class VllmRefusedError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'VllmRefusedError';
  }
}

export function vllmControl(opts: {
  baseUrl: string;
  servedModelName: string;
  lora?: { maxRank: number };
  apiKey?: string;
}): VllmControl {
  const baseUrl = opts.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  return {
    baseUrl,
    servedModelName: opts.servedModelName,
    ...(opts.lora ? { lora: opts.lora } : {}),
    ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
    healthy: (timeoutMs) => vllmHealthy(baseUrl, timeoutMs),
    health: (timeoutMs) => vllmHealth(baseUrl, timeoutMs),
    async reloadWeights(dir) {
      try {
        await reloadWeights(baseUrl, dir);
      } catch (err) {
        // infra/vllm.ts reports an error status as "POST … → HTTP <status>: …"; anything else is transport.
        const m = /→ HTTP (\d{3})/.exec(err instanceof Error ? err.message : '');
        if (m) throw new VllmRefusedError(Number(m[1]), (err as Error).message);
        throw err;
      }
    },
    async loadLora(name, dir, inPlace) {
      const res = await fetch(`${baseUrl}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
        },
        body: JSON.stringify({ lora_name: name, lora_path: dir, ...(inPlace ? { load_inplace: true } : {}) }),
        signal: AbortSignal.timeout(120_000),
      });
      const text = await res.text();
      if (!res.ok)
        throw new VllmRefusedError(res.status, `load_lora_adapter → HTTP ${res.status}: ${text.slice(0, 500)}`);
    },
  };
}
