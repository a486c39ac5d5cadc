/**
 * Orchestration overhead (issue 7.2): what Temporal and MinIO cost per task group, per episode and per
 * step, against env time and policy time, for the real browser env (Chromium, fast) and for the
 * OSWorld-like simulated profile at real-time latencies. Async campaigns through the real workers; the
 * group workflows' histories give the Temporal side, the trajectory manifests the activity side.
 *
 *   npm run bench -- overhead [--label after] [--envs browser,osworld] [--seconds 120] [--queue 1]
 *
 * Results go to docs/bench/overhead.json under `runs[label]` (earlier labels are kept: before/after) and
 * the chart docs/bench/overhead.png.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import { barChartSvg, writeSvgAsPng } from '../lib/charts';
import type { CampaignConfigInput } from '../schemas/config';
import { mapLimit } from '../lib/concurrency';
import { benchSuffix, startBenchCluster } from './lib/bench-cluster';
import { episodeTimes, runCampaignWindow } from './lib/campaign-window';
import { slotTimeBreakdown, type SlotTimeBreakdown } from './lib/efficiency-metrics';
import { groupHistoryTimes } from './lib/group-history';
import {
  groupOverhead,
  summarizeOverhead,
  type GroupEpisodeTiming,
  type GroupOverhead,
  type OverheadSummary,
} from './lib/overhead-metrics';
import { benchOutDir } from './lib/output';

interface EnvCase {
  name: 'browser' | 'osworld';
  slots: number;
  suite: string;
  nMax: number;
  simulated: boolean;
  scale: number;
}

const CASES: Record<EnvCase['name'], EnvCase> = {
  // Real Chromium task pages: 4 contexts (the throughput peak on 2 cores), groups of ≤ 4 episodes.
  browser: { name: 'browser', slots: 4, suite: 'quickstart', nMax: 4, simulated: false, scale: 1 },
  // OSWorld-like latencies at real time (scale 1): resets ≈ 25 s, steps ≈ 2.6 s.
  osworld: { name: 'osworld', slots: 32, suite: 'all', nMax: 8, simulated: true, scale: 1 },
};

export interface OverheadCaseResult {
  env: EnvCase['name'];
  campaignId: string;
  settings: EnvCase & { queue: number };
  summary: OverheadSummary;
  slotTime: SlotTimeBreakdown;
  cores: Record<string, number>;
}

export async function measureOverhead(c: EnvCase, seconds: number, queue = 1): Promise<OverheadCaseResult> {
  const cluster = await startBenchCluster(`ovh-${c.name}`, {
    envWorkers: 1,
    envSlots: c.slots,
    envKind: c.simulated ? 'simulated' : 'browser',
    ...(c.simulated ? { simulatedProfile: 'osworld', simulatedTimeScale: c.scale, simulatedBernoulliReward: 0.5 } : {}),
    policyServers: 1,
    policyBasePort: 8900 + Math.floor(Math.random() * 90),
  });
  try {
    const id = `ovh-${c.name}-${benchSuffix()}`;
    const config: CampaignConfigInput & { campaign: { id: string } } = {
      campaign: { id, suite: c.suite, mode: 'async', maxTrainSteps: 10_000 },
      // queue 1 (envConcurrency = slots): no episode waits for a slot inside the activity, so a group's time
      // is its episodes' work plus orchestration. queue > 1 hides orchestration latency behind queued
      // episodes (then read the slot-time breakdown: group times include waits for a slot).
      rollout: { envConcurrency: c.slots * queue, nMax: c.nMax },
      trainer: { minGroups: 2, maxGroups: 4 },
      eval: { everyVersions: 100_000, episodesPerTask: 1, gateEveryVersions: 0 },
    };
    console.log(`\n== ${c.name}: campaign ${id}, ${c.slots} slots, ${seconds} s window`);
    const run = await runCampaignWindow(cluster, config, { seconds });
    const rollouts = run.manifests.filter((m) => m.source === 'rollout' && m.status === 'ok' && m.timing);
    const byGroup = new Map<string, GroupEpisodeTiming[]>();
    for (const m of rollouts) {
      const t = m.timing!;
      const list = byGroup.get(m.groupId) ?? [];
      list.push({ ...t, numSteps: m.numSteps });
      byGroup.set(m.groupId, list);
    }
    const groups = (
      await mapLimit([...byGroup.keys()], 8, async (groupId) => {
        const h = await groupHistoryTimes(cluster.client.temporal, groupId).catch(() => null);
        return h ? groupOverhead(h, byGroup.get(groupId)!) : null;
      })
    ).filter((g): g is GroupOverhead => g !== null);
    const episodes = [...byGroup.values()].flat();
    return {
      env: c.name,
      campaignId: id,
      settings: { ...c, queue },
      summary: summarizeOverhead(groups, episodes),
      slotTime: slotTimeBreakdown(episodeTimes([...rollouts, ...run.evalManifests]), c.slots, run.window),
      cores: run.cores,
    };
  } finally {
    await cluster.close();
  }
}

const ms = (x: number) => x.toFixed(x < 10 ? 1 : 0);

export async function benchOverhead(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      label: { type: 'string', default: 'before' },
      envs: { type: 'string', default: 'browser,osworld' },
      seconds: { type: 'string', default: '120' },
      queue: { type: 'string', default: '1' },
    },
  });
  const label = values.label!;
  const names = values.envs!.split(',') as Array<EnvCase['name']>;
  const dir = benchOutDir();
  const file = path.join(dir, 'overhead.json');
  const results: OverheadCaseResult[] = [];
  let runs: Record<string, { date: string; results: OverheadCaseResult[] }> = {};
  for (const n of names) {
    const c = CASES[n];
    if (!c) throw new Error(`unknown env case ${n} (browser, osworld)`);
    const r = await measureOverhead(c, Number(values.seconds), Number(values.queue));
    results.push(r);
    const s = r.summary;
    console.log(
      `${n}: ${s.groups} groups, ${s.episodes} episodes, ${s.steps} steps; per group seen ${ms(s.perGroup.workflowSeenMs)} ms = work ${ms(s.perGroup.episodeWorkMs)} + storage ${ms(s.perGroup.storageMs)} + temporal ${ms(s.perGroup.temporalMs)} (overhead ${(s.overheadShare * 100).toFixed(1)} %)`
    );
    // Written after every case (a later case failing keeps the earlier ones); other labels are kept.
    const prev = fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as { runs?: typeof runs }) : {};
    const kept = (prev.runs?.[label]?.results ?? []).filter((x) => !results.some((y) => y.env === x.env));
    runs = { ...(prev.runs ?? {}), [label]: { date: new Date().toISOString(), results: [...kept, ...results] } };
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, `${JSON.stringify({ suite: 'overhead', runs }, null, 2)}\n`);
    console.log(`wrote ${path.relative(PROJECT_ROOT, file)} (runs: ${Object.keys(runs).join(', ')})`);
  }
  await overheadChart(runs, path.join(dir, 'overhead.png'));
}

export async function overheadChart(
  runs: Record<string, { results: OverheadCaseResult[] }>,
  file: string
): Promise<void> {
  // Per run and env: the overhead share of a group's time (only meaningful without queueing), and the share
  // of env-slot time spent neither in the env nor in the policy (what orchestration costs in throughput).
  const bars = Object.entries(runs).flatMap(([label, r]) =>
    r.results.flatMap((x) => [
      ...((x.settings.queue ?? 1) === 1
        ? [{ label: `${x.env} ${label}: group`, value: x.summary.overheadShare * 100, color: '#1f77b4' }]
        : []),
      {
        label: `${x.env} ${label}: slots`,
        value: (1 - x.slotTime.env - x.slotTime.policy) * 100,
        color: '#ff7f0e',
      },
    ])
  );
  await writeSvgAsPng(
    barChartSvg(bars, {
      title: 'Orchestration cost: % of a group’s time (blue) and % of env-slot time outside env + policy (orange)',
      yLabel: 'percent',
      width: 1200,
    }),
    file,
    loadInfraSettings().chromiumPath
  );
  console.log(`wrote ${path.relative(PROJECT_ROOT, file)}`);
}
