/**
 * DartflowClient — the typed API for starting and controlling campaigns from code (the CLI uses it too).
 *
 *   const client = await DartflowClient.connect();
 *   const campaign = await client.startCampaign({ campaign: { id: 'exp-1', suite: 'quickstart' } });
 *   console.log(await campaign.status());
 *   await campaign.setConfig({ 'trainer.learningRate': 1e-3 });
 *   const result = await campaign.result();
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Client, ServiceError, WorkflowExecutionAlreadyStartedError, type WorkflowHandle } from '@temporalio/client';
import { loadInfraSettings, type InfraSettings } from '../infra/settings';
import { connectClient } from '../infra/temporal-connection';
import type { CampaignStatus, TaskStats } from '../schemas/campaign';
import { parseCampaignConfig } from '../config/load';
import type { CampaignConfig, CampaignConfigInput } from '../schemas/config';
import { SEARCH_ATTRIBUTES } from '../schemas/search-attributes';
import { TASK_QUEUES } from '../schemas/task-queues';
import { campaignWorkflow, type CampaignResult } from '../workflows/campaign';
import {
  injectSuccessUpdate,
  pauseUpdate,
  pinCheckpointUpdate,
  quarantineTaskUpdate,
  resumeUpdate,
  setConfigUpdate,
  statusQuery,
  stopUpdate,
  taskStatsQuery,
} from '../workflows/messages';

/** Workflow id of a campaign: readable in the Temporal UI, and one running campaign per id. */
export const campaignWorkflowId = (campaignId: string): string => `campaign-${campaignId}`;

export interface CampaignListEntry {
  campaignId: string;
  workflowId: string;
  runId: string;
  status: string;
  policyVersion?: number;
  successRate?: number;
  state?: string;
  startTime: Date;
}

/**
 * How often an Update refused at a continue-as-new boundary is sent (again to the next run): with the backoff
 * below ≈ 15 s in all, since a loaded worker's workflow task may time out twice at the boundary.
 */
const UPDATE_TRIES = 12;

/**
 * An Update that reaches the campaign while its run continues-as-new, or while the workflow task that
 * carries it fails or times out (a loaded worker), is aborted by the server with a retryable error ("workflow
 * is closing": UNAVAILABLE; RESOURCE_EXHAUSTED, ABORTED, INTERNAL) that can outlast the client's own gRPC
 * retries; sent again, the next run or task takes it. Validation failures (WorkflowUpdateFailedError) and
 * unknown campaigns (WorkflowNotFoundError) are not ServiceErrors here and stay final.
 */
const RETRYABLE_GRPC_CODES = new Set([
  8 /* RESOURCE_EXHAUSTED */, 10 /* ABORTED */, 13 /* INTERNAL */, 14 /* UNAVAILABLE */,
]);
export function isRunBoundaryRefusal(err: unknown): boolean {
  if (!(err instanceof ServiceError)) return false;
  const cause = err.cause as { code?: number; details?: string } | undefined;
  return RETRYABLE_GRPC_CODES.has(cause?.code ?? -1) || /closing|workflow task/i.test(cause?.details ?? '');
}

export class CampaignHandle {
  constructor(
    readonly campaignId: string,
    readonly handle: WorkflowHandle<typeof campaignWorkflow>
  ) {}

  status(): Promise<CampaignStatus> {
    return this.handle.query(statusQuery);
  }
  taskStats(): Promise<TaskStats[]> {
    return this.handle.query(taskStatsQuery);
  }
  pause(): Promise<CampaignStatus> {
    return this.update((updateId) => this.handle.executeUpdate(pauseUpdate, { updateId }));
  }
  resume(): Promise<CampaignStatus> {
    return this.update((updateId) => this.handle.executeUpdate(resumeUpdate, { updateId }));
  }
  /** Graceful stop: in-flight groups and train steps finish, a final evaluation runs, the workflow completes. */
  stop(): Promise<CampaignStatus> {
    return this.update((updateId) => this.handle.executeUpdate(stopUpdate, { updateId }));
  }
  /** Live-tunable fields only (see LIVE_TUNABLE_FIELDS); invalid values are rejected by the Update's validator. */
  setConfig(overrides: Record<string, number | boolean | string>): Promise<CampaignStatus> {
    return this.update((updateId) => this.handle.executeUpdate(setConfigUpdate, { args: [{ overrides }], updateId }));
  }
  quarantineTask(taskId: string, quarantined = true): Promise<TaskStats> {
    return this.update((updateId) =>
      this.handle.executeUpdate(quarantineTaskUpdate, { args: [{ taskId, quarantined }], updateId })
    );
  }
  injectSuccess(taskId: string, manifestKey: string): Promise<TaskStats> {
    return this.update((updateId) =>
      this.handle.executeUpdate(injectSuccessUpdate, { args: [{ taskId, manifestKey }], updateId })
    );
  }
  /** Serve and train from an earlier checkpoint (manual rollback); null unpins. */
  pinCheckpoint(version: number | null): Promise<CampaignStatus> {
    return this.update((updateId) => this.handle.executeUpdate(pinCheckpointUpdate, { args: [{ version }], updateId }));
  }
  result(): Promise<CampaignResult> {
    return this.handle.result();
  }

  /** An Update, sent again (same update id, so applied at most once) when refused at a run boundary. */
  private async update<T>(send: (updateId: string) => Promise<T>): Promise<T> {
    const updateId = randomUUID();
    for (let attempt = 1; ; attempt++) {
      try {
        return await send(updateId);
      } catch (err) {
        if (attempt >= UPDATE_TRIES || !isRunBoundaryRefusal(err)) throw err;
        await delay(Math.min(250 * attempt, 2_000));
      }
    }
  }
}

export class DartflowClient {
  private constructor(
    readonly temporal: Client,
    readonly settings: InfraSettings
  ) {}

  static async connect(settings: InfraSettings = loadInfraSettings()): Promise<DartflowClient> {
    return new DartflowClient(await connectClient(settings), settings);
  }

  /** Starts a campaign (config validated here first, so a bad field fails before anything starts). */
  async startCampaign(
    config: CampaignConfigInput,
    opts: {
      continueAsNewAfterIterations?: number;
      shardContinueAsNewAfterIterations?: number;
      shardLaneEpisodes?: number;
    } = {}
  ): Promise<CampaignHandle> {
    // A bad value is a ConfigError naming the field, the value and what is allowed; nothing is started.
    const parsed: CampaignConfig = parseCampaignConfig(config, 'startCampaign config');
    const id = parsed.campaign.id;
    try {
      const handle = await this.temporal.workflow.start(campaignWorkflow, {
        taskQueue: TASK_QUEUES.orchestrator,
        workflowId: campaignWorkflowId(id),
        args: [
          {
            config: parsed,
            continueAsNewAfterIterations: opts.continueAsNewAfterIterations,
            shardContinueAsNewAfterIterations: opts.shardContinueAsNewAfterIterations,
            shardLaneEpisodes: opts.shardLaneEpisodes,
          },
        ],
        typedSearchAttributes: [
          { key: SEARCH_ATTRIBUTES.campaignId, value: id },
          { key: SEARCH_ATTRIBUTES.state, value: 'starting' },
          { key: SEARCH_ATTRIBUTES.policyVersion, value: 0 },
        ],
        staticSummary: `dartflow campaign ${id} (${parsed.campaign.mode}, suite ${parsed.campaign.suite})`,
      });
      return new CampaignHandle(id, handle);
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        throw new Error(
          `campaign "${id}" is already running (workflow ${campaignWorkflowId(id)}); use another campaign.id or stop it first`
        );
      }
      throw err;
    }
  }

  getCampaign(campaignId: string): CampaignHandle {
    return new CampaignHandle(
      campaignId,
      this.temporal.workflow.getHandle<typeof campaignWorkflow>(campaignWorkflowId(campaignId))
    );
  }

  /** Campaigns known to Temporal, newest first, filtered with the stock visibility query language. */
  async listCampaigns(query = ''): Promise<CampaignListEntry[]> {
    const base = `WorkflowType = 'campaignWorkflow'`;
    const out: CampaignListEntry[] = [];
    for await (const wf of this.temporal.workflow.list({ query: query ? `${base} AND (${query})` : base })) {
      const sa = wf.typedSearchAttributes;
      out.push({
        campaignId: sa.get(SEARCH_ATTRIBUTES.campaignId) ?? wf.workflowId.replace(/^campaign-/, ''),
        workflowId: wf.workflowId,
        runId: wf.runId,
        status: wf.status.name,
        policyVersion: sa.get(SEARCH_ATTRIBUTES.policyVersion),
        successRate: sa.get(SEARCH_ATTRIBUTES.successRate),
        state: sa.get(SEARCH_ATTRIBUTES.state),
        startTime: wf.startTime,
      });
      if (out.length >= 200) break;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.temporal.connection.close();
  }
}
