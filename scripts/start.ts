/**
 * `npm start`: the main job. Brings the infrastructure up by itself, starts every role as a local child
 * process (orchestrator, env worker with Chromium, policy server, trainer), runs the quickstart campaign
 * (configs/quickstart.yaml: a deliberately weak behaviour-cloning start, then DART's RL) with a live
 * progress line, and ends with a summary that keeps the BC start, the RL lift (greedy and temperature 1),
 * episodes and time apart, the Temporal UI link, where trajectories and checkpoints are, and a learning
 * curve PNG with the RL start marked. Extra arguments are config overrides: `npm start -- trainer.learningRate=0.001`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeSvgAsPng } from '../lib/charts';
import { keys } from '../storage/keys';
import { ensureInfra } from './ensure-infra';
import {
  bcStartEval,
  breakdownLines,
  campaignCurveSvg,
  quickstartBreakdown,
  runQuickstartCampaign,
} from './lib/quickstart-campaign';
import { runViewer } from '../viewer/main';

/** The viewer on its usual port, or any free one when that is taken (another viewer, another user). */
async function startQuickstartViewer() {
  try {
    return await runViewer(['--quiet']);
  } catch {
    return runViewer(['--quiet', '--port', '0']);
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const settings = await ensureInfra();
  const viewer = await startQuickstartViewer();
  console.log(`[start] viewer (trajectories, curves, ledger while the campaign runs): ${viewer.loginUrl}`);
  const { config, result, uiLink } = await runQuickstartCampaign(settings, process.argv.slice(2));
  const outDir = path.join(settings.dataDir, 'results', config.campaign.id);
  fs.mkdirSync(outDir, { recursive: true });
  const pngFile = path.join(outDir, 'learning-curve.png');
  await writeSvgAsPng(
    campaignCurveSvg(
      result.evals,
      'minutes',
      'dartflow quickstart — held-out success (BC start, then RL)',
      bcStartEval(config, result.evals)
    ),
    pngFile,
    settings.chromiumPath
  );
  const breakdown = quickstartBreakdown(config, result);
  // Which machine measured it: the same campaign takes minutes more on a slower or busier 2-core box.
  const machine = {
    cpuModel: os.cpus()[0]?.model.trim() ?? '',
    cores: os.cpus().length,
    loadAverageAtEnd: Number(os.loadavg()[0]!.toFixed(1)),
    totalMinutesWithInfra: Number(((Date.now() - started) / 60_000).toFixed(2)),
  };
  fs.writeFileSync(path.join(outDir, 'result.json'), JSON.stringify({ ...result, breakdown, machine }, null, 2));
  console.log('\n=== dartflow quickstart: summary ===');
  for (const line of breakdownLines(config, breakdown)) console.log(line);
  console.log(`            infra failures ${result.infraFailures} (never recorded as reward)`);
  console.log(
    `wall time:  total ${machine.totalMinutesWithInfra.toFixed(1)} min with infrastructure start (load average ${machine.loadAverageAtEnd.toFixed(1)} on ${machine.cores} cores at the end, this run included; CPU ${machine.cpuModel || 'unknown'})`
  );
  console.log(`Temporal UI: ${uiLink}`);
  console.log(
    `trajectories: s3://${settings.s3.bucket}/${keys.trajectoryPrefix(config.campaign.id)} (MinIO console ${settings.s3.consoleUrl ?? settings.s3.endpoint})`
  );
  console.log(
    `checkpoints:  s3://${settings.s3.bucket}/${keys.checkpointPrefix(config.campaign.id)}  ledger: s3://${settings.s3.bucket}/${keys.ledgerPrefix(config.campaign.id)}`
  );
  console.log(`learning curve: ${pngFile}`);
  console.log(
    `viewer: ${viewer.url}/campaigns/${encodeURIComponent(config.campaign.id)} (log in with ${viewer.loginUrl}; it stops with this command, \`npx dartflow viewer\` serves it again)`
  );
  await viewer.close();
}

main().catch((err: unknown) => {
  console.error(`[start] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
