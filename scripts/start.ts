/**
 * `npm start`: the main job. Brings the infrastructure up by itself, starts every role as a local child
 * process (orchestrator, env worker with Chromium, policy server, trainer), runs the quickstart campaign
 * (configs/quickstart.yaml) with a live progress line, and ends with a summary: held-out success,
 * episodes, wall time, the Temporal UI link, where trajectories and checkpoints are, and a learning
 * curve PNG. Extra arguments are config overrides: `npm start -- trainer.learningRate=0.001`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { startLocalWorkers } from '../cli/local-workers';
import { watchCampaign } from '../cli/main';
import { DartflowClient } from '../client/dartflow-client';
import { loadCampaignConfig } from '../config/load';
import { PROJECT_ROOT } from '../infra/settings';
import { lineChartSvg, writeSvgAsPng } from '../lib/charts';
import { keys } from '../storage/keys';
import { ensureInfra } from './ensure-infra';

async function main(): Promise<void> {
  const started = Date.now();
  const settings = await ensureInfra();
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const config = loadCampaignConfig(path.join(PROJECT_ROOT, 'configs', 'quickstart.yaml'), [
    `campaign.id=quickstart-${stamp}`,
    ...process.argv.slice(2),
  ]);
  const workers = startLocalWorkers(settings, { envWorkers: 1, envSlots: 4, envKind: 'browser', policyServers: 1 });
  console.log(
    `[start] workers: ${workers.children.map((c) => c.name).join(', ')} (logs in ${path.join(settings.dataDir, 'logs')})`
  );
  const client = await DartflowClient.connect(settings);
  let campaignRef: { terminate: () => Promise<unknown> } | undefined;
  let interrupted = false;
  process.on('SIGINT', () => {
    // Ctrl-C ends this demo campaign (a durable campaign would resume with the next workers otherwise).
    if (interrupted) return; // a second Ctrl-C (or the group-wide signal) must not cut the cleanup short
    interrupted = true;
    console.log('\n[start] interrupted: terminating the campaign and stopping workers');
    void (campaignRef?.terminate().catch(() => undefined) ?? Promise.resolve())
      .then(() => workers.stop())
      .then(() => process.exit(130));
  });
  try {
    const campaign = await client.startCampaign(config);
    campaignRef = { terminate: () => campaign.handle.terminate('npm start interrupted') };
    const uiLink = `${settings.temporal.uiUrl}/namespaces/${settings.temporal.namespace}/workflows/${campaign.handle.workflowId}`;
    console.log(`[start] campaign ${config.campaign.id}: ${uiLink}`);
    await watchCampaign(campaign, {
      maxTrainSteps: config.campaign.maxTrainSteps,
      target: config.campaign.targetSuccess,
    });
    const result = await campaign.result();
    const outDir = path.join(settings.dataDir, 'results', config.campaign.id);
    fs.mkdirSync(outDir, { recursive: true });
    const families = [...new Set(result.evals.flatMap((e) => Object.keys(e.perFamily)))];
    const curve = lineChartSvg(
      [
        {
          name: 'held-out (all)',
          points: result.evals.map((e) => [e.atMs / 60_000, e.successRate] as [number, number]),
        },
        ...families.map((f) => ({
          name: f,
          points: result.evals.map((e) => [e.atMs / 60_000, e.perFamily[f] ?? 0] as [number, number]),
        })),
      ],
      {
        title: `dartflow quickstart — held-out greedy success`,
        xLabel: 'wall time (minutes)',
        yLabel: 'success rate',
        yMin: 0,
        yMax: 1,
        hLines: [{ y: 0.9, label: '90% target' }],
      }
    );
    const pngFile = path.join(outDir, 'learning-curve.png');
    await writeSvgAsPng(curve, pngFile, settings.chromiumPath);
    fs.writeFileSync(path.join(outDir, 'result.json'), JSON.stringify(result, null, 2));
    const final = result.finalEval;
    console.log('\n=== dartflow quickstart: summary ===');
    console.log(
      `held-out greedy success: ${
        final
          ? `${(final.successRate * 100).toFixed(1)}% (${Object.entries(final.perFamily)
              .map(([k, v]) => `${k} ${(v * 100).toFixed(0)}%`)
              .join(', ')}) at policy v${final.version}`
          : 'n/a'
      }`
    );
    console.log(
      `episodes: ${result.episodes} in ${result.trainSteps} train steps; infra failures ${result.infraFailures} (never recorded as reward)`
    );
    console.log(
      `wall time: campaign ${(result.wallMs / 60_000).toFixed(1)} min, total ${((Date.now() - started) / 60_000).toFixed(1)} min`
    );
    console.log(`Temporal UI: ${uiLink}`);
    console.log(
      `trajectories: s3://${settings.s3.bucket}/${keys.trajectoryPrefix(config.campaign.id)} (MinIO console ${settings.s3.consoleUrl ?? settings.s3.endpoint})`
    );
    console.log(
      `checkpoints:  s3://${settings.s3.bucket}/${keys.checkpointPrefix(config.campaign.id)}  ledger: s3://${settings.s3.bucket}/${keys.ledgerPrefix(config.campaign.id)}`
    );
    console.log(`learning curve: ${pngFile}`);
  } finally {
    await client.close();
    await workers.stop();
  }
}

main().catch((err: unknown) => {
  console.error(`[start] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
