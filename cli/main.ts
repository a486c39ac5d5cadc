/**
 * `dartflow <command>` — the command-line interface (bin in package.json). Every command talks to the
 * servers named by the environment (README "Configuration"): a local dev setup or a cluster.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import type { z } from 'zod';
import { createCampaignDataActivities } from '../activities/data/campaign-data';
import { CampaignHandle, DartflowClient } from '../client/dartflow-client';
import { loadCampaignConfig } from '../config/load';
import { infraCommand } from '../infra/cli';
import { loadInfraSettings, PROJECT_ROOT } from '../infra/settings';
import type { CampaignStatus } from '../schemas/campaign';
import { PolicySchema } from '../schemas/config';
import { UiTarsOptionsSchema } from '../schemas/uitars-options';
import { TASK_QUEUES } from '../schemas/task-queues';
import { ObjectStore } from '../storage/object-store';
import { loadSuite } from '../tasks/loader';
import { evaluateWorkflow, precollectWorkflow } from '../workflows';
import { readLineage } from './lineage';
import { ALL_ROLES, ROLES, startLocalWorkers, type LocalWorkers, type Role } from './local-workers';
import { envPoolConfigFromEnv } from '../envs/pool-factory';
import { readPolicySpecFile } from '../policy/spec-file';

/** Env kinds `dartflow workers --env-kind` starts (remote and osworld read DARTFLOW_ENV_* / DARTFLOW_OSWORLD_*). */
const ENV_KINDS = ['browser', 'simulated', 'remote', 'osworld'] as const;
type EnvKind = (typeof ENV_KINDS)[number];
import { bar, StatusLine } from './progress';
import { listenForStop } from './stop-request';
// Static: a dynamic import('../viewer/main') is not resolved when the CLI runs through bin/dartflow.js.
import { runViewer } from '../viewer/main';

const USAGE = `usage: dartflow <command> [options]

infrastructure
  infra up | down | status           start (or reuse) / stop / show the local Temporal dev server and MinIO
  workers [--roles r1,r2] [--env-workers N] [--env-slots N] [--env-kind browser|simulated|remote|osworld] [--policy-servers M]
          [--policy-port P] [--spec-file F]
                                     run roles (orchestrator, env, trainer, policy) here as child processes;
          [--vlm-base-model DIR]     policy servers listen on P, P+1, … (default 8700). SIGINT, SIGTERM or
          [--vlm-world-size N]       SIGHUP stops every role and its Chromium. Role trainer-vlm (never a
                                     default): the Python VLM trainer on queue trainer-vlm, for the model in
                                     DIR (or DARTFLOW_VLM_BASE_MODEL), training data-parallel (FSDP) over N
                                     processes (default 1; on GPUs: one per GPU). Policy servers serve the
                                     network each checkpoint names; --spec-file F (a PolicySpec JSON) pins
                                     them to that one network and they refuse checkpoints of any other
  env-server [--port P] [--slots N]  serve browser envs over the remote env protocol (docs/env-protocol.openapi.yaml)
  viewer [--port 8300] [--host 127.0.0.1] [--token T]
                                     read-only web viewer of campaigns and trajectories (docs/viewer.md)

campaigns
  campaign start [--config FILE] [--set section.field=value ...] [--watch]
  campaign status ID | watch ID | pause ID | resume ID | stop ID
  campaign set ID section.field=value ...      live-tunable fields (rejected with a reason otherwise)
  campaign quarantine ID TASK [--off]          stop / resume sampling a task
  campaign pin ID VERSION|none                 serve and train from an earlier checkpoint (rollback)
  campaign list [--query "DartflowState = 'running'"]
  campaign lineage ID                          checkpoint chain and ledger (which step consumed what)
  precollect ID --suite S [--k 2] [--attempts 64] [--temperature 1.5]
          [--policy embedded|oracle|uitars|uitars-oracle] [--policy-options JSON|FILE] [--vlm-model NAME]
          [--pool-key task|instruction] [--pool-max-per-task 64]
                                     fill the experience pool before a campaign starts; for a VLM campaign
                                     --policy uitars-oracle (UI-TARS demonstrations) with the campaign's
                                     policy.options (JSON, or a JSON/YAML file) and policy.vlmModel;
                                     --pool-key as the campaign's curation.poolKey (else the pool is
                                     trimmed per task)
  eval ID --suite S [--episodes 20] [--version N] [--policy P] [--policy-options JSON|FILE] [--vlm-model NAME]`;

function fmtStatus(s: CampaignStatus): string {
  const e = s.lastEval;
  const sampled = e?.sampledSuccessRate !== undefined ? ` (T=1 ${(e.sampledSuccessRate * 100).toFixed(1)}%)` : '';
  const ev = e ? `${(e.successRate * 100).toFixed(1)}%${sampled} @v${e.version}` : '—';
  return `${s.campaignId} [${s.phase}] v${s.policyVersion} | episodes ${s.episodes} | train steps ${s.trainSteps} | rollout success ${(s.recentSuccessRate * 100).toFixed(1)}% | held-out ${ev} | in flight ${s.episodesInFlight} eps / ${s.groupsInFlight} groups | buffered ${s.bufferedGroups} | infra failures ${s.infraFailures}`;
}

/** Live view until the campaign completes: success, version, throughput (episodes/min). */
export async function watchCampaign(
  handle: CampaignHandle,
  opts: { maxTrainSteps?: number; target?: number } = {}
): Promise<void> {
  const line = new StatusLine();
  let prev: { episodes: number; at: number } | undefined;
  let rate = 0;
  for (;;) {
    let s: CampaignStatus;
    try {
      s = await handle.status();
    } catch {
      const desc = await handle.handle.describe();
      if (desc.status.name !== 'RUNNING') {
        line.done(`campaign ${handle.campaignId}: ${desc.status.name}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    const now = Date.now();
    if (prev && now > prev.at) rate = ((s.episodes - prev.episodes) / (now - prev.at)) * 60_000;
    prev = { episodes: s.episodes, at: now };
    const progress = opts.maxTrainSteps ? s.trainSteps / opts.maxTrainSteps : 0;
    line.update(
      `${bar(opts.target && s.lastEval ? s.lastEval.successRate / opts.target : progress)} ${fmtStatus(s)} | ${rate.toFixed(0)} eps/min`
    );
    if (s.phase === 'completed' || s.phase === 'failed') {
      line.done(fmtStatus(s));
      return;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function parseOverrides(items: string[]): Record<string, number | boolean | string> {
  const out: Record<string, number | boolean | string> = {};
  for (const item of items) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new Error(`"${item}": expected section.field=value`);
    const raw = item.slice(eq + 1);
    out[item.slice(0, eq)] =
      raw === 'true' ? true : raw === 'false' ? false : Number.isFinite(Number(raw)) && raw !== '' ? Number(raw) : raw;
  }
  return out;
}

async function campaignCommand(args: string[]): Promise<void> {
  const [sub, id, ...rest] = args;
  const client = await DartflowClient.connect();
  try {
    switch (sub) {
      case 'start': {
        const { values } = parseArgs({
          args: args.slice(1),
          options: { config: { type: 'string' }, set: { type: 'string', multiple: true }, watch: { type: 'boolean' } },
        });
        const cfg = loadCampaignConfig(values.config, values.set ?? []);
        const handle = await client.startCampaign(cfg);
        console.log(`started campaign ${cfg.campaign.id} (workflow ${handle.handle.workflowId})`);
        if (client.settings.temporal.uiUrl)
          console.log(
            `Temporal UI: ${client.settings.temporal.uiUrl}/namespaces/${client.settings.temporal.namespace}/workflows/${handle.handle.workflowId}`
          );
        if (values.watch) await watchCampaign(handle, { maxTrainSteps: cfg.campaign.maxTrainSteps });
        return;
      }
      case 'list': {
        const { values } = parseArgs({ args: args.slice(1), options: { query: { type: 'string' } } });
        for (const c of await client.listCampaigns(values.query ?? '')) {
          console.log(
            `${c.campaignId.padEnd(24)} ${c.status.padEnd(12)} ${String(c.state ?? '').padEnd(10)} v${c.policyVersion ?? 0} success ${c.successRate !== undefined ? (c.successRate * 100).toFixed(1) + '%' : '—'}  started ${c.startTime.toISOString()}`
          );
        }
        return;
      }
    }
    if (!id) throw new Error(`campaign ${sub ?? ''}: missing campaign id\n${USAGE}`);
    const handle = client.getCampaign(id);
    switch (sub) {
      case 'status':
        console.log(fmtStatus(await handle.status()));
        for (const t of await handle.taskStats())
          console.log(
            `  ${t.taskId.padEnd(20)} episodes ${t.episodes} successes ${t.successes} n=${t.lastN}${t.hard ? ' hard' : ''}${t.quarantined ? ' QUARANTINED' : ''} pool ${t.poolSize}`
          );
        return;
      case 'watch':
        return watchCampaign(handle);
      case 'pause':
        console.log(fmtStatus(await handle.pause()));
        return;
      case 'resume':
        console.log(fmtStatus(await handle.resume()));
        return;
      case 'stop':
        console.log(fmtStatus(await handle.stop()));
        return;
      case 'set':
        console.log(fmtStatus(await handle.setConfig(parseOverrides(rest))));
        return;
      case 'quarantine': {
        const [taskId, flag] = rest;
        if (!taskId) throw new Error('campaign quarantine ID TASK [--off]');
        console.log(await handle.quarantineTask(taskId, flag !== '--off'));
        return;
      }
      case 'pin': {
        const v = rest[0];
        if (v === undefined) throw new Error('campaign pin ID VERSION|none');
        console.log(fmtStatus(await handle.pinCheckpoint(v === 'none' ? null : Number(v))));
        return;
      }
      case 'lineage': {
        const store = ObjectStore.fromSettings(client.settings);
        const lineage = await readLineage(store, id);
        for (const c of lineage.checkpoints)
          console.log(
            `v${c.version} ← ${c.parentVersion === null ? 'init' : `v${c.parentVersion}`}  ${c.weights.sha256.slice(0, 12)}  ${c.ledgerKey ?? ''}`
          );
        for (const e of lineage.ledger) {
          const stale = e.consumed.map((c) => c.staleness);
          console.log(
            `step ${e.trainStep}: v${e.fromVersion}→v${e.toVersion} consumed ${e.consumed.length} (pool ${e.consumed.filter((c) => c.injectedFromPool).length}) staleness max ${Math.max(...stale)} IS mean ${e.isWeight.mean.toFixed(3)} min ${e.isWeight.min.toFixed(3)} truncated ${(e.isWeight.truncatedFraction * 100).toFixed(1)}%`
          );
        }
        console.log(
          lineage.problems.length
            ? `PROBLEMS:\n  ${lineage.problems.join('\n  ')}`
            : 'lineage OK: one checkpoint chain, every trajectory consumed at most once'
        );
        return;
      }
      default:
        throw new Error(`unknown campaign command "${sub ?? ''}"\n${USAGE}`);
    }
  } finally {
    await client.close();
  }
}

/** Episode policies `dartflow precollect` runs: sampling ones, and the demonstrations of each policy kind. */
export const PRECOLLECT_POLICIES = ['embedded', 'oracle', 'uitars', 'uitars-oracle'] as const;
/** The UI-TARS policies: they take `--policy-options` (a campaign's policy.options) and `--vlm-model`. */
const UITARS_POLICIES: readonly string[] = ['uitars', 'uitars-oracle'];

/** The campaign config's `policy.options` schema (schemas/config.ts; fields in schemas/uitars-options.ts). */
const POLICY_OPTIONS_SCHEMA = PolicySchema.shape.options.unwrap();

export class CliUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliUsageError';
  }
}

/** Levenshtein distance, for "did you mean" on a misspelt option name. */
function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = row[j]!;
      row[j] = Math.min(up + 1, row[j - 1]! + 1, diag + (a[i - 1]!.toLowerCase() === b[j - 1]!.toLowerCase() ? 0 : 1));
      diag = up;
    }
  }
  return row[b.length]!;
}

function formatOptionIssue(issue: z.core.$ZodIssue, options: Record<string, unknown>): string {
  const known = Object.keys(POLICY_OPTIONS_SCHEMA.shape);
  if (issue.code === 'unrecognized_keys') {
    return issue.keys
      .map((k) => {
        if (k === 'model')
          return `"model": the served model name is not a policy option here; pass --vlm-model ${JSON.stringify(options[k])}`;
        const near = known.filter((n) => editDistance(k, n) <= 2);
        return `unknown field "${k}"${near.length ? ` (did you mean "${near[0]}"?)` : ''}; the fields are ${known.join(', ')}`;
      })
      .join('; ');
  }
  if (issue.code === 'invalid_key') {
    const parent = issue.path.slice(0, -1).map(String).join('.');
    const key = String(issue.path[issue.path.length - 1]);
    return `${parent}: key ${JSON.stringify(key)} is not allowed: ${issue.issues[0]?.message ?? issue.message}`;
  }
  const field = issue.path.map(String).join('.');
  const top = String(issue.path[0] ?? '');
  const what = (UiTarsOptionsSchema.shape as Record<string, z.ZodType>)[top]?.description;
  const got = issue.path.reduce<unknown>(
    (cur, k) => (cur !== null && typeof cur === 'object' ? (cur as Record<PropertyKey, unknown>)[k] : undefined),
    options
  );
  return `${field}: got ${got === undefined ? 'nothing' : JSON.stringify(got)}; ${issue.message}${what ? ` — ${what}` : ''}`;
}

/**
 * `--policy-options`: a campaign's `policy.options` as inline JSON (`{...}`) or a JSON/YAML file, checked
 * against the campaign config's schema. A bad value is a CliUsageError naming the field, what it got and
 * what is allowed.
 */
export function parsePolicyOptionsFlag(raw: string): Record<string, unknown> {
  const flag = '--policy-options';
  let value: unknown;
  const inline = raw.trimStart().startsWith('{');
  if (inline) {
    try {
      value = JSON.parse(raw);
    } catch (err) {
      throw new CliUsageError(
        `${flag}: not valid JSON (${err instanceof Error ? err.message : String(err)}); give a JSON object such as '{"maxTokens": 64}', or a JSON/YAML file`
      );
    }
  } else {
    if (!fs.existsSync(raw))
      throw new CliUsageError(`${flag}: "${raw}" is neither a JSON object ('{...}') nor an existing file`);
    const text = fs.readFileSync(raw, 'utf8');
    try {
      value = raw.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
    } catch (err) {
      throw new CliUsageError(`${flag} ${raw}: does not parse (${err instanceof Error ? err.message : String(err)})`);
    }
  }
  const where = inline ? flag : `${flag} ${raw}`;
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new CliUsageError(
      `${where}: expected an object of UI-TARS options (a campaign's policy.options), got ${JSON.stringify(value)}`
    );
  const options = value as Record<string, unknown>;
  const r = POLICY_OPTIONS_SCHEMA.safeParse(options);
  if (!r.success)
    throw new CliUsageError(`${where}: ${r.error.issues.map((i) => formatOptionIssue(i, options)).join('; ')}`);
  return r.data as Record<string, unknown>;
}

/**
 * The episode policy and its options of `dartflow precollect` / `eval`, checked before anything connects:
 * the UI-TARS policies get `{ model: --vlm-model (default "dartflow"), ...--policy-options }`, as a
 * `policy.kind: vlm` campaign sends them (workflows/campaign.ts policyOptions).
 */
export function episodePolicyFromFlags(
  cmd: 'precollect' | 'eval',
  values: { policy?: string; 'policy-options'?: string; 'vlm-model'?: string }
): { policyKind: string; policyOptions?: Record<string, unknown> } {
  const policyKind = values.policy ?? 'embedded';
  if (cmd === 'precollect' && !(PRECOLLECT_POLICIES as readonly string[]).includes(policyKind))
    throw new CliUsageError(
      `--policy must be ${PRECOLLECT_POLICIES.join(', ')}, got "${policyKind}" (a VLM campaign pre-collects with uitars-oracle)`
    );
  const uitars = UITARS_POLICIES.includes(policyKind);
  if (!uitars && (values['policy-options'] !== undefined || values['vlm-model'] !== undefined))
    throw new CliUsageError(
      `--policy-options and --vlm-model are UI-TARS options: they apply to --policy ${UITARS_POLICIES.join(' or ')}, not "${policyKind}"`
    );
  if (!uitars) return { policyKind };
  if (values['vlm-model'] !== undefined && values['vlm-model'].trim() === '')
    throw new CliUsageError(
      "--vlm-model: empty; give the vLLM servers' --served-model-name (a campaign's policy.vlmModel)"
    );
  const options = values['policy-options'] !== undefined ? parsePolicyOptionsFlag(values['policy-options']) : {};
  return { policyKind, policyOptions: { model: values['vlm-model'] ?? 'dartflow', ...options } };
}

async function precollectOrEval(cmd: 'precollect' | 'eval', args: string[]): Promise<void> {
  const [id, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      suite: { type: 'string' },
      k: { type: 'string' },
      attempts: { type: 'string' },
      policy: { type: 'string' },
      'policy-options': { type: 'string' },
      'vlm-model': { type: 'string' },
      temperature: { type: 'string' },
      episodes: { type: 'string' },
      version: { type: 'string' },
      'pool-key': { type: 'string' },
      'pool-max-per-task': { type: 'string' },
    },
  });
  if (!id || id.startsWith('--') || !values.suite) throw new Error(`${cmd} ID --suite SUITE …\n${USAGE}`);
  const poolKey = values['pool-key'] ?? 'task';
  if (poolKey !== 'task' && poolKey !== 'instruction')
    throw new Error(`--pool-key must be task or instruction (the campaign's curation.poolKey), got "${poolKey}"`);
  const { policyKind, policyOptions } = episodePolicyFromFlags(cmd, values);
  const tasks = loadSuite(values.suite).taskSpecs as unknown as Array<{ id: string } & Record<string, unknown>>;
  const client = await DartflowClient.connect();
  try {
    const servers = await createCampaignDataActivities({
      store: ObjectStore.fromSettings(client.settings),
    }).listPolicyServers({});
    const endpoints = servers.map((s) => s.url);
    if (cmd === 'precollect') {
      const result = await client.temporal.workflow.execute(precollectWorkflow, {
        taskQueue: TASK_QUEUES.orchestrator,
        workflowId: `${id}-precollect-${Date.now()}`,
        args: [
          {
            campaignId: id,
            tasks,
            successesPerTask: intFlag('k', values.k, 2),
            maxAttemptsPerTask: intFlag('attempts', values.attempts, 64),
            policyKind,
            ...(policyOptions ? { policyOptions } : {}),
            endpoints,
            temperature: Number(values.temperature ?? 1.5),
            ...(poolKey === 'instruction'
              ? { poolByInstruction: { maxPerTask: intFlag('pool-max-per-task', values['pool-max-per-task'], 64) } }
              : {}),
          },
        ],
      });
      for (const [t, r] of Object.entries(result.perTask))
        console.log(`${t}: ${r.successes} successes in ${r.attempts} attempts`);
    } else {
      const point = await client.temporal.workflow.execute(evaluateWorkflow, {
        taskQueue: TASK_QUEUES.orchestrator,
        workflowId: `${id}-eval-manual-${Date.now()}`,
        args: [
          {
            campaignId: id,
            version: Number(values.version ?? 0),
            tasks,
            episodesPerTask: Number(values.episodes ?? 20),
            endpoints,
            policyKind,
            ...(policyOptions ? { policyOptions } : {}),
            atEpisodes: 0,
            startedAtMs: Date.now(),
          },
        ],
      });
      const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
      console.log(
        `held-out success, greedy: ${pct(point.successRate)} over ${point.episodes} episodes`,
        point.perFamily
      );
      if (point.sampledSuccessRate !== undefined)
        console.log(
          `held-out success, temperature 1: ${pct(point.sampledSuccessRate)} over ${point.sampledEpisodes ?? 0} episodes`,
          point.sampledPerFamily ?? {}
        );
    }
  } finally {
    await client.close();
  }
}

/** A whole number ≥ `min` from a command-line flag, or a clear error naming the flag. */
function intFlag(flag: string, raw: string | undefined, fallback: number, min = 1): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${flag} must be a whole number ≥ ${min}, got "${raw}"`);
  return n;
}

async function workersCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      roles: { type: 'string' },
      'env-workers': { type: 'string' },
      'env-slots': { type: 'string' },
      'env-kind': { type: 'string' },
      'policy-servers': { type: 'string' },
      'policy-port': { type: 'string' },
      'vlm-base-model': { type: 'string' },
      'vlm-world-size': { type: 'string' },
      'spec-file': { type: 'string' },
    },
  });
  const roles = (values.roles ? values.roles.split(',') : ROLES) as Role[];
  // Read the spec here, so a missing or invalid file is one clear error before any server starts.
  if (values['spec-file']) {
    try {
      readPolicySpecFile(values['spec-file']);
    } catch (err) {
      throw new Error(
        `--spec-file ${values['spec-file']}: not a policy spec (${err instanceof Error ? err.message : String(err)})`
      );
    }
  }
  for (const r of roles)
    if (!ALL_ROLES.includes(r)) throw new Error(`unknown role "${r}" (roles: ${ALL_ROLES.join(', ')})`);
  if (values['vlm-world-size'] !== undefined && !roles.includes('trainer-vlm'))
    throw new Error("--vlm-world-size sets the Python VLM trainer's ranks: add trainer-vlm to --roles");
  // DARTFLOW_ENV_KIND (what a lone env worker reads) counts too: the children get the kind set explicitly.
  const envKind = values['env-kind'] ?? process.env.DARTFLOW_ENV_KIND ?? 'browser';
  if (!ENV_KINDS.includes(envKind as EnvKind))
    throw new Error(`--env-kind must be ${ENV_KINDS.join(', ')}, got "${envKind}"`);
  // Env workers read their settings from the environment; check them here, before any child starts, so a
  // missing variable is one clear error instead of env workers that exit one by one (the error names it).
  if (roles.includes('env')) envPoolConfigFromEnv({ ...process.env, DARTFLOW_ENV_KIND: envKind });
  const options = {
    roles,
    envWorkers: intFlag('env-workers', values['env-workers'], 1),
    envSlots: intFlag('env-slots', values['env-slots'], 4),
    envKind: envKind as EnvKind,
    policyServers: intFlag('policy-servers', values['policy-servers'], 1),
    policyBasePort: intFlag('policy-port', values['policy-port'], 8700),
    ...(values['vlm-base-model'] ? { vlmBaseModel: values['vlm-base-model'] } : {}),
    vlmWorldSize: intFlag('vlm-world-size', values['vlm-world-size'], 1),
    echo: true,
    // Pins the policy servers to one network (a PolicySpec JSON file); without it they serve the network each
    // checkpoint names.
    ...(values['spec-file'] ? { env: { DARTFLOW_POLICY_SPEC_FILE: path.resolve(values['spec-file']) } } : {}),
  } as const;
  // Listen before the children exist: a signal that arrives while they start must still stop them.
  // (Signal handlers run on a later tick, by when `workers` is assigned.)
  const stop = listenForStop({ onRepeat: () => workers.kill() });
  const workers: LocalWorkers = startLocalWorkers(loadInfraSettings(), options);
  console.log(`running ${workers.children.map((c) => c.name).join(', ')} (Ctrl-C stops them; twice: at once)`);
  const reason = await stop.stopped;
  console.log(`stopping (${reason === 'wrapper-gone' ? 'the npm/npx process that started dartflow is gone' : reason})`);
  await workers.stop();
  stop.dispose();
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'infra':
      return infraCommand(rest[0]);
    case 'workers':
      return workersCommand(rest);
    case 'env-server': {
      // One child (no tsx wrapper process in between), told to stop when this process is.
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', path.join(PROJECT_ROOT, 'envs', 'remote-server.ts'), ...rest],
        // The IPC channel lets the server notice this process dying, even by kill -9 (infra/parent-watch.ts).
        { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], detached: true }
      );
      const stop = listenForStop({ onRepeat: () => child.kill('SIGKILL') });
      void stop.stopped.then(() => child.kill('SIGTERM'));
      const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
      stop.dispose();
      if (code !== 0) throw new Error(`env-server exited with code ${code}`);
      return;
    }
    case 'viewer': {
      const viewer = await runViewer(rest);
      console.log(`dartflow viewer: ${viewer.loginUrl}`);
      const stop = listenForStop();
      await stop.stopped;
      await viewer.close();
      stop.dispose();
      return;
    }
    case 'campaign':
      return campaignCommand(rest);
    case 'precollect':
    case 'eval':
      return precollectOrEval(cmd, rest);
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return;
    default:
      throw new Error(`unknown command "${cmd}"\n${USAGE}`);
  }
}

/** Runs one CLI command and exits: the entry point of bin/dartflow.js. */
export function runCli(argv: string[]): void {
  main(argv).then(
    // Exit explicitly: a command is done when it returns, whatever handles a library left open.
    () => process.exit(0),
    (err: unknown) => {
      console.error(`dartflow: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    }
  );
}

if (require.main === module) runCli(process.argv.slice(2));
