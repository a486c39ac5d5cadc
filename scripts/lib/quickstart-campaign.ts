/**
 * The embedded default, end to end: the quickstart campaign (configs/quickstart.yaml) through Temporal with
 * every role as a local child process. Shared by `npm start` (scripts/start.ts) and the quickstart
 * learning-curve benchmark (bench/quickstart.ts), so both measure the same code path.
 */
import path from 'node:path';
import { startLocalWorkers, type LocalWorkers } from '../../cli/local-workers';
import { watchCampaign } from '../../cli/main';
import { DartflowClient } from '../../client/dartflow-client';
import type { CampaignResult } from '../../workflows/campaign';
import { loadCampaignConfig } from '../../config/load';
import { PROJECT_ROOT, type InfraSettings } from '../../infra/settings';
import { lineChartSvg } from '../../lib/charts';
import type { CampaignConfig } from '../../schemas/config';
import type { EvalPoint } from '../../schemas/campaign';

export const QUICKSTART_CONFIG = path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml');

export interface QuickstartRun {
  config: CampaignConfig;
  result: CampaignResult;
  uiLink: string;
  workflowId: string;
}

/**
 * Runs the quickstart campaign with config overrides (`section.field=value`) to completion: local
 * workers (1 env worker × 4 Chromium contexts, 1 policy server, orchestrator, trainer), a live progress
 * line, then the campaign's result. Ctrl-C terminates the campaign and stops the workers.
 */
export async function runQuickstartCampaign(
  settings: InfraSettings,
  overrides: string[],
  opts: { idPrefix?: string; log?: (line: string) => void } = {}
): Promise<QuickstartRun> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const config = loadCampaignConfig(QUICKSTART_CONFIG, [
    `campaign.id=${opts.idPrefix ?? 'quickstart'}-${stamp}`,
    ...overrides,
  ]);
  const workers: LocalWorkers = startLocalWorkers(settings, {
    envWorkers: 1,
    envSlots: 4,
    envKind: 'browser',
    policyServers: 1,
  });
  log(
    `[start] workers: ${workers.children.map((c) => c.name).join(', ')} (logs in ${path.join(settings.dataDir, 'logs')})`
  );
  const client = await DartflowClient.connect(settings);
  let campaignRef: { terminate: () => Promise<unknown> } | undefined;
  let interrupted = false;
  const onSigint = () => {
    // Ctrl-C ends this demo campaign (a durable campaign would resume with the next workers otherwise).
    if (interrupted) return; // a second Ctrl-C (or the group-wide signal) must not cut the cleanup short
    interrupted = true;
    log('\n[start] interrupted: terminating the campaign and stopping workers');
    void (campaignRef?.terminate().catch(() => undefined) ?? Promise.resolve())
      .then(() => workers.stop())
      .then(() => process.exit(130));
  };
  process.on('SIGINT', onSigint);
  try {
    const campaign = await client.startCampaign(config);
    campaignRef = { terminate: () => campaign.handle.terminate('npm start interrupted') };
    const uiLink = `${settings.temporal.uiUrl}/namespaces/${settings.temporal.namespace}/workflows/${campaign.handle.workflowId}`;
    log(`[start] campaign ${config.campaign.id}: ${uiLink}`);
    await watchCampaign(campaign, {
      maxTrainSteps: config.campaign.maxTrainSteps,
      target: config.campaign.targetSuccess,
    });
    const result = await campaign.result();
    return { config, result, uiLink, workflowId: campaign.handle.workflowId };
  } finally {
    process.off('SIGINT', onSigint);
    await client.close();
    await workers.stop();
  }
}

/** Learning curve of a campaign's evaluations: overall and per family, vs wall time or vs rollout episodes. */
export function campaignCurveSvg(evals: readonly EvalPoint[], x: 'minutes' | 'episodes', title: string): string {
  const xOf = (e: EvalPoint) => (x === 'minutes' ? e.atMs / 60_000 : e.atEpisodes);
  const families = [...new Set(evals.flatMap((e) => Object.keys(e.perFamily)))];
  return lineChartSvg(
    [
      { name: 'held-out (all)', points: evals.map((e) => [xOf(e), e.successRate] as [number, number]) },
      ...families.map((f) => ({
        name: f,
        points: evals.map((e) => [xOf(e), e.perFamily[f] ?? 0] as [number, number]),
      })),
    ],
    {
      title,
      xLabel: x === 'minutes' ? 'wall time since campaign start (minutes)' : 'RL rollout episodes',
      yLabel: 'success rate',
      yMin: 0,
      yMax: 1,
      hLines: [{ y: 0.9, label: '90% target' }],
    }
  );
}
