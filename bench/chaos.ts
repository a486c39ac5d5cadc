/**
 * Chaos benchmark (issue 8): the longer run of test/chaos/chaos.test.ts. A campaign on a private Temporal
 * dev server and MinIO goes through several rounds of faults — kill -9 of the env worker, the policy
 * server, the trainer and the orchestrator worker, kill -9 + restart of the dev server (same SQLite file)
 * and of MinIO (same data dir) — one at a time, each followed by recovery, then stops; the ledger,
 * checkpoints, manifests and Temporal histories are audited (infra/chaos-audit.ts).
 * Writes docs/bench/chaos.json.   Run: npm run bench -- chaos [--rounds 4] [--seed 1] [--browser]
 */
import fs from 'node:fs';
import path from 'node:path';
import { runChaosCampaign, type ChaosRunReport } from '../infra/chaos';
import { PROJECT_ROOT } from '../infra/settings';
import { benchOutDir } from './lib/output';

const arg = (args: string[], name: string): string | undefined =>
  args.includes(name) ? args[args.indexOf(name) + 1] : undefined;

export async function benchChaos(args: string[]): Promise<void> {
  const rounds = Number(arg(args, '--rounds') ?? 4);
  const seed = Number(arg(args, '--seed') ?? 1);
  const browser = args.includes('--browser');
  const t0 = Date.now();
  const report = await runChaosCampaign({
    seed,
    rounds,
    serial: true,
    envKind: browser ? 'browser' : 'simulated',
    envSlots: 4,
    downMs: { min: 500, max: 5000 },
    recoveryTimeoutMs: 300_000,
    log: (line) => console.log(`[bench chaos ${((Date.now() - t0) / 1000).toFixed(0)}s] ${line}`),
  });
  const out = path.join(benchOutDir(), 'chaos.json');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(
    out,
    `${JSON.stringify({ measuredAt: new Date().toISOString(), env: browser ? 'browser' : 'simulated', ...report }, null, 2)}\n`
  );
  console.log(`[bench chaos] wrote ${path.relative(PROJECT_ROOT, out)}\n`);
  console.log(chaosMarkdown(report));
  if (!report.campaign.completed || report.audit.problems.length > 0) process.exitCode = 1;
}

const s = (ms: number | null) => (ms === null ? '—' : `${(ms / 1000).toFixed(1)} s`);

/** The per-fault table and the counts, as they go into docs/reliability.md. */
export function chaosMarkdown(r: ChaosRunReport): string {
  const byKind = new Map<string, ChaosRunReport['faults']>();
  for (const f of r.faults) byKind.set(f.kind, [...(byKind.get(f.kind) ?? []), f]);
  const rows = [...byKind.entries()].map(([kind, fs_]) => {
    const rec = fs_.map((f) => f.recoverMs).filter((x): x is number => x !== null);
    const triggered = fs_.filter((f) => f.triggered).length;
    return `| ${kind} | ${fs_.length} | ${fs_[0]!.trigger} (${triggered}/${fs_.length}) | ${rec.length}/${fs_.length} | ${s(Math.min(...rec))} – ${s(Math.max(...rec))} | ${fs_[0]!.recoveredBy.split(' ')[0]} |`;
  });
  const a = r.audit;
  const accounted = Object.entries(a.trajectories.accounted)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return [
    '| fault (kill -9 by PID, then restart) | injected | hit during | recovered | time to recover (min – max) | recovery = progress in |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `- campaign: ${r.campaign.completed ? 'completed' : `did not complete (${r.campaign.error ?? ''})`}, ${r.campaign.result?.trainSteps ?? '—'} train steps, ${r.campaign.result?.episodes ?? '—'} episodes, ${s(r.wallMs)} wall time`,
    `- trajectories: ${a.trajectories.total} (${Object.entries(a.trajectories.byStatus)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', '
      )}); consumed ${a.trajectories.consumed} (each once; ${a.trajectories.pooledReuses} pooled reuses), accounted for: ${accounted}; unaccounted ${a.trajectories.unaccounted}`,
    `- checkpoints: v0..v${a.versions - 1}, one parent chain; ${a.trainSteps} ledger entries`,
    `- retries the server recorded: ${
      Object.entries(r.history.activityRetries)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }; activity timeouts ${r.history.activityTimeouts}, workflow task timeouts ${r.history.workflowTaskTimeouts}; episodes with a failed attempt ${a.episodesWithFailedAttempts} (${a.failedAttemptsRecoveredOk} completed ok on retry, ${a.lostEpisodes} lost and never trained on)`,
    `- audit problems: ${a.problems.length === 0 ? 'none' : a.problems.slice(0, 5).join('; ')}`,
    `- roles that died on their own: ${r.unexpectedExits.length === 0 ? 'none' : r.unexpectedExits.join('; ')}`,
  ].join('\n');
}
