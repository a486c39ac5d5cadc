/**
 * What the viewer reads from Temporal: campaign workflows from visibility (with dartflow's search
 * attributes) and, for a running campaign, its `status` query. Read-only: no signal, update or start.
 * The connection is made lazily and remade after a failure, so the viewer starts (and serves MinIO
 * pages) while Temporal is down, and recovers when it comes back.
 */
import { WorkflowNotFoundError } from '@temporalio/common';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import type { CampaignStatus } from '../schemas/campaign';
import { SEARCH_ATTRIBUTES } from '../schemas/search-attributes';
import { statusQuery } from '../workflows/messages';

/** A query to a running campaign waits this long: no orchestrator worker means no answer at all. */
export const STATUS_QUERY_TIMEOUT_MS = 3000;
const LIST_LIMIT = 200;

export const campaignWorkflowId = (campaignId: string): string => `campaign-${campaignId}`;

/** After a status query got no answer, later page views say so at once for this long instead of waiting again. */
export const NO_ANSWER_MEMORY_MS = 30_000;

export class TemporalSource {
  private client: Promise<Client> | null = null;
  /** campaignId → when its status query last went unanswered, and why. */
  readonly unanswered = new Map<string, { at: number; message: string }>();

  constructor(
    private readonly connect: () => Promise<Client>,
    readonly namespace: string,
    /** Temporal Web UI base URL (e.g. http://127.0.0.1:8233); undefined for a cluster without one. */
    readonly uiUrl: string | undefined
  ) {}

  async get(): Promise<Client> {
    this.client ??= this.connect();
    try {
      return await this.client;
    } catch (err) {
      this.client = null;
      throw err;
    }
  }

  workflowUrl(workflowId: string): string | undefined {
    if (!this.uiUrl) return undefined;
    return `${this.uiUrl.replace(/\/$/, '')}/namespaces/${encodeURIComponent(this.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = null;
    if (c) await c.then((client) => client.connection.close()).catch(() => undefined);
  }
}

export interface CampaignRow {
  campaignId: string;
  workflowId: string;
  runId: string;
  /** Temporal execution status (RUNNING, COMPLETED, TERMINATED, …). */
  status: string;
  state?: string;
  policyVersion?: number;
  successRate?: number;
  startTime: Date;
  closeTime?: Date;
}

function toRow(
  wf: Pick<
    WorkflowExecutionInfo,
    'workflowId' | 'runId' | 'status' | 'startTime' | 'closeTime' | 'typedSearchAttributes'
  >
): CampaignRow {
  const sa = wf.typedSearchAttributes;
  return {
    campaignId: sa.get(SEARCH_ATTRIBUTES.campaignId) ?? wf.workflowId.replace(/^campaign-/, ''),
    workflowId: wf.workflowId,
    runId: wf.runId,
    status: wf.status.name,
    state: sa.get(SEARCH_ATTRIBUTES.state),
    policyVersion: sa.get(SEARCH_ATTRIBUTES.policyVersion),
    successRate: sa.get(SEARCH_ATTRIBUTES.successRate),
    startTime: wf.startTime,
    closeTime: wf.closeTime,
  };
}

/** Campaign workflows, newest first; `query` is Temporal's list filter (e.g. `DartflowState = 'running'`). */
export async function listCampaigns(client: Client, query: string): Promise<{ rows: CampaignRow[]; more: boolean }> {
  const base = `WorkflowType = 'campaignWorkflow'`;
  const rows: CampaignRow[] = [];
  for await (const wf of client.workflow.list({
    query: query ? `${base} AND (${query})` : base,
    pageSize: LIST_LIMIT,
  })) {
    if (rows.length >= LIST_LIMIT) return { rows, more: true };
    rows.push(toRow(wf));
  }
  return { rows, more: false };
}

export interface CampaignExecution {
  row: CampaignRow;
  /** The live status when the campaign runs and its orchestrator answered in time. */
  live?: CampaignStatus;
  /** Why there is no live status although the campaign runs. */
  liveError?: string;
}

/** The campaign's workflow (latest run), or null when this namespace has none. */
export async function describeCampaign(source: TemporalSource, campaignId: string): Promise<CampaignExecution | null> {
  const client = await source.get();
  const handle = client.workflow.getHandle(campaignWorkflowId(campaignId));
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
  const row = toRow(description);
  if (row.status !== 'RUNNING') return { row };
  const recent = source.unanswered.get(campaignId);
  if (recent && Date.now() - recent.at < NO_ANSWER_MEMORY_MS) return { row, liveError: recent.message };
  try {
    const live = await client.withDeadline(Date.now() + STATUS_QUERY_TIMEOUT_MS, () => handle.query(statusQuery));
    source.unanswered.delete(campaignId);
    return { row, live };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const liveError =
      `the campaign is running but its status query did not answer within ${STATUS_QUERY_TIMEOUT_MS / 1000} s ` +
      `(${message.split('\n')[0]}); is an orchestrator worker running for namespace ${source.namespace}?`;
    source.unanswered.set(campaignId, { at: Date.now(), message: liveError });
    return { row, liveError };
  }
}
