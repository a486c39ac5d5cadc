/**
 * Env slots held, as the env workers count them: Σ `dartflow_env_busy_seconds_total` over the env workers
 * (slot-seconds an episode held an env, integrated exactly by metrics/env.ts). The efficiency metrics count
 * env time from the trajectory manifests that were kept; the two differ by env time nobody keeps — an attempt
 * retried beside itself, an episode whose record was lost — which is exactly what a benchmark must not hide.
 */
import { sumOfSamples } from '../../metrics/policy';

export const ENV_BUSY_SECONDS = 'dartflow_env_busy_seconds_total';

/** Σ busy slot-seconds of the env workers at these metrics URLs; undefined when any cannot be read. */
export async function envBusySeconds(urls: readonly string[]): Promise<number | undefined> {
  if (urls.length === 0) return undefined;
  const totals = await Promise.all(
    urls.map(async (url) => {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
        return res.ok ? sumOfSamples(await res.text(), ENV_BUSY_SECONDS) : undefined;
      } catch {
        return undefined;
      }
    })
  );
  return totals.every((t) => t !== undefined) ? totals.reduce((a, t) => a + t, 0) : undefined;
}
