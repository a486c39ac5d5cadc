/**
 * Env slots held, as the env workers count them: Σ `dartflow_env_busy_seconds_total` over the env workers
 * (slot-seconds an episode held an env, integrated exactly by metrics/env.ts). The efficiency metrics count
 * the env operations of the trajectories that were kept; held time also covers what a kept episode does
 * between its env operations (policy calls, trajectory writes, the release: about 1 % of slot time) and any
 * env time nobody keeps — an attempt running beside its own retry, an episode whose record was lost. A gap
 * beyond that 1 % is exactly what a benchmark must not hide.
 */
import { sumOfSamples } from '../../metrics/policy';

export const ENV_BUSY_SECONDS = 'dartflow_env_busy_seconds_total';

/**
 * Σ busy slot-seconds of the env workers at these metrics URLs; undefined when any cannot be read or is not
 * one of ours. `namespace`: the bench's private Temporal namespace, which the workers' SDK metrics carry as a
 * label — a default port taken by some other worker (the child then serves no metrics) must not be read.
 */
export async function envBusySeconds(urls: readonly string[], namespace?: string): Promise<number | undefined> {
  if (urls.length === 0) return undefined;
  const totals = await Promise.all(
    urls.map(async (url) => {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
        if (!res.ok) {
          await res.body?.cancel(); // release the connection
          return undefined;
        }
        const text = await res.text();
        if (namespace !== undefined && !text.includes(`namespace="${namespace}"`)) return undefined;
        return sumOfSamples(text, ENV_BUSY_SECONDS);
      } catch {
        return undefined;
      }
    })
  );
  return totals.every((t) => t !== undefined) ? totals.reduce((a, t) => a + t, 0) : undefined;
}
