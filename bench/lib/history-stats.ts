/**
 * How much Temporal history a campaign produces: events and bytes per workflow run, grouped by workflow
 * type, from the namespace's visibility list and each run's history. Used by the control-plane bench to
 * report events per episode and per train step, the largest history of any run, and the continue-as-new
 * count (issue 12). Reads a private bench namespace, so everything listed belongs to the campaign.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

export interface RunHistoryStats {
  workflowId: string;
  runId: string;
  type: string;
  events: number;
  bytes: number;
  continuedAsNew: boolean;
  /** Bytes of the input carried to the next run (continue-as-new), when it continued. */
  carriedBytes?: number;
}

export interface HistorySummary {
  runs: number;
  byType: Record<string, { runs: number; events: number; bytes: number; maxEvents: number; maxBytes: number }>;
  totalEvents: number;
  largest: { workflowId: string; runId: string; type: string; events: number; bytes: number } | null;
  continueAsNew: number;
  maxCarriedBytes: number;
}

/** Pure: sums per-run stats into the summary the bench reports. */
export function summarizeHistories(runs: readonly RunHistoryStats[]): HistorySummary {
  const byType: HistorySummary['byType'] = {};
  let largest: HistorySummary['largest'] = null;
  for (const r of runs) {
    const t = (byType[r.type] ??= { runs: 0, events: 0, bytes: 0, maxEvents: 0, maxBytes: 0 });
    t.runs++;
    t.events += r.events;
    t.bytes += r.bytes;
    t.maxEvents = Math.max(t.maxEvents, r.events);
    t.maxBytes = Math.max(t.maxBytes, r.bytes);
    if (!largest || r.events > largest.events) largest = { ...r };
  }
  return {
    runs: runs.length,
    byType,
    totalEvents: runs.reduce((a, r) => a + r.events, 0),
    largest: largest
      ? { workflowId: largest.workflowId, runId: largest.runId, type: largest.type, events: largest.events, bytes: largest.bytes }
      : null,
    continueAsNew: runs.filter((r) => r.continuedAsNew).length,
    maxCarriedBytes: Math.max(0, ...runs.map((r) => r.carriedBytes ?? 0)),
  };
}

/** Every run in the namespace (optionally of workflow ids with a prefix), with its history size. */
export async function collectHistoryStats(
  client: Client,
  opts: { idPrefix?: string; limit?: number; onProgress?: (n: number) => void } = {}
): Promise<RunHistoryStats[]> {
  const out: RunHistoryStats[] = [];
  for await (const wf of client.workflow.list()) {
    if (opts.idPrefix && !wf.workflowId.startsWith(opts.idPrefix)) continue;
    if (opts.limit !== undefined && out.length >= opts.limit) break;
    const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    const events = history.events ?? [];
    const can = events.find((e) => e.workflowExecutionContinuedAsNewEventAttributes);
    const carried = can?.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads ?? [];
    out.push({
      workflowId: wf.workflowId,
      runId: wf.runId,
      type: wf.type,
      events: events.length,
      bytes: temporal.api.history.v1.History.encode(history).finish().length,
      continuedAsNew: can !== undefined,
      ...(can ? { carriedBytes: carried.reduce((a, p) => a + (p.data?.length ?? 0), 0) } : {}),
    });
    opts.onProgress?.(out.length);
  }
  return out;
}
