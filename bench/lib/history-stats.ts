/**
 * How much Temporal history a campaign produces: events and bytes per workflow run, grouped by workflow
 * type, from the namespace's visibility list and each run's history. Used by the control-plane bench to
 * report events per episode and per train step, the largest history of any run, and the continue-as-new
 * count and non-determinism errors (issue 12). Reads a private bench namespace, so everything listed belongs to the campaign.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { isNondeterminismFailure } from '../../infra/chaos';

export interface RunHistoryStats {
  workflowId: string;
  runId: string;
  type: string;
  events: number;
  bytes: number;
  continuedAsNew: boolean;
  /** Bytes of the input carried to the next run (continue-as-new), when it continued. */
  carriedBytes?: number;
  /** Start of the run (its first event), ms since the epoch: orders a campaign's runs. */
  startedAt?: number;
  /** WorkflowTaskFailed events caused by non-determinism in this run. */
  nondeterminismErrors?: number;
}

export interface HistorySummary {
  runs: number;
  byType: Record<string, { runs: number; events: number; bytes: number; maxEvents: number; maxBytes: number }>;
  totalEvents: number;
  largest: { workflowId: string; runId: string; type: string; events: number; bytes: number } | null;
  continueAsNew: number;
  maxCarriedBytes: number;
  /** Σ WorkflowTaskFailed events caused by non-determinism, over every run. */
  nondeterminismErrors: number;
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
      ? {
          workflowId: largest.workflowId,
          runId: largest.runId,
          type: largest.type,
          events: largest.events,
          bytes: largest.bytes,
        }
      : null,
    continueAsNew: runs.filter((r) => r.continuedAsNew).length,
    maxCarriedBytes: runs.reduce((a, r) => Math.max(a, r.carriedBytes ?? 0), 0),
    nondeterminismErrors: runs.reduce((a, r) => a + (r.nondeterminismErrors ?? 0), 0),
  };
}

/** The runs of one workflow type in start order (e.g. every run of a campaign, for the history-size chart). */
export function runsInOrder(runs: readonly RunHistoryStats[], type: string): RunHistoryStats[] {
  return runs.filter((r) => r.type === type).sort((a, b) => (a.startedAt ?? 0) - (b.startedAt ?? 0));
}

/** A protobuf Timestamp in ms (its seconds may be a Long, which Number() does not convert). */
function millis(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number | undefined {
  if (!t) return undefined;
  const s = t.seconds as { toNumber?: () => number } | number | string | null | undefined;
  const seconds = typeof s === 'object' && s?.toNumber ? s.toNumber() : Number(s ?? 0);
  return seconds * 1000 + Math.floor((t.nanos ?? 0) / 1e6);
}

/** One run's size from its fetched history (no I/O). */
export function runHistoryStats(
  wf: { workflowId: string; runId: string; type: string },
  history: temporal.api.history.v1.IHistory
): RunHistoryStats {
  const events = history.events ?? [];
  const can = events.find((e) => e.workflowExecutionContinuedAsNewEventAttributes);
  const carried = can?.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads ?? [];
  const startedAt = millis(events[0]?.eventTime);
  return {
    workflowId: wf.workflowId,
    runId: wf.runId,
    type: wf.type,
    events: events.length,
    bytes: temporal.api.history.v1.History.encode(history).finish().length,
    continuedAsNew: can !== undefined,
    ...(can ? { carriedBytes: carried.reduce((a, p) => a + (p.data?.length ?? 0), 0) } : {}),
    ...(startedAt !== undefined ? { startedAt } : {}),
    nondeterminismErrors: events.filter(isNondeterminismFailure).length,
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
    out.push(runHistoryStats(wf, history));
    opts.onProgress?.(out.length);
  }
  return out;
}
