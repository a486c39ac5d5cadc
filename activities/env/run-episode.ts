/**
 * The runEpisode activity (task queue `env`): acquire an env slot → reset → loop {observe → act →
 * execute} until done or maxSteps → evaluate → release the slot (in every case: also on failure and
 * cancellation) → write screenshots, steps.jsonl and manifest.json → wait until the viewer's index
 * entry is stored (its write may linger a little to share a delta with other episodes').
 *
 * Built by a factory over injected dependencies (pool, store, policy factories) so tests and the
 * worker wire real or fake parts alike. Failures leave as typed ApplicationFailures (failures.ts);
 * a failed attempt's manifest has status env_error/policy_error/cancelled and reward null, never 0.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { EpisodeTiming, ObjectRef, StepRecord, TrajectoryManifest } from '../../schemas/records';
import { StepRecordSchema } from '../../schemas/records';
import { keys } from '../../storage/keys';
import { serializeJsonLines, sha256Hex, type ObjectStore } from '../../storage/object-store';
import { instructionKeyOf } from './instruction-key';
import { indexTrajectory } from '../../storage/trajectory-index';
import { heartbeatGate } from './heartbeat-gate';
import { commitManifest } from './manifest-commit';
import { EnvError } from '../../envs/errors';
import { StorageUnavailableError } from '../../storage/errors';
import { TaskConfigError } from '../../tasks/errors';
import type { EnvPool, GuiEnv, Observation } from '../../envs/types';
import { parseTaskSpec } from '../../tasks/loader';
import type { TaskSpec } from '../../tasks/schema';
import { runActionSequence } from '../../actions/sequence';
import { failureStatus, toActivityFailure } from './failures';
import { EpisodeClock } from './timing';
import {
  RunEpisodeInputSchema,
  type EpisodeHeartbeat,
  type RunEpisodeInput,
  type RunEpisodeParsed,
  type RunEpisodeResult,
} from './input';
import {
  PolicyConfigError,
  PolicyUnavailableError,
  type EpisodePolicy,
  type PolicyDecision,
  type PolicyFactory,
  type PolicyHistoryItem,
} from './policy';

export interface EnvActivityDeps {
  pool: EnvPool;
  store: ObjectStore;
  /** Policy factories by kind (input.policy.kind): 'oracle', 'random', and whatever the policy client adds. */
  policies: Record<string, PolicyFactory>;
  now?: () => number;
}

/** What the activity needs from Temporal's Context; tests pass their own. */
export interface EpisodeHooks {
  heartbeat(details: EpisodeHeartbeat): void;
  signal?: AbortSignal;
  attempt: number;
}

function temporalHooks(): EpisodeHooks & { dispose(): void } {
  const ctx = Context.current();
  // Short episodes send no heartbeat at all (a server write each); long env operations (an OSWorld reset)
  // are kept alive, so only a dead worker times an attempt out (see heartbeat-gate.ts).
  const gate = heartbeatGate<EpisodeHeartbeat>((d) => ctx.heartbeat(d), ctx.info.heartbeatTimeoutMs);
  return {
    heartbeat: (d) => gate.heartbeat(d),
    dispose: () => gate.dispose(),
    signal: ctx.cancellationSignal,
    attempt: ctx.info.attempt,
  };
}

/** FNV-1a: per-step sampling seeds differ between episodes of one GRPO group (same task seed). */
function stepSeed(trajectoryId: string, step: number, attempt: number): number {
  let h = 0x811c9dc5;
  for (const ch of `${trajectoryId}:${step}:${attempt}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  return h >>> 0;
}

/**
 * How long an episode's index entry may wait for other episodes' entries to share its delta: a
 * twentieth of the episode's own duration, at most 2 s. An env worker finishing dozens of episodes a
 * second then writes a delta per partition every few hundred ms instead of one per episode or two (the
 * index was half of MinIO's requests at 512 simulated envs), while a short episode (a quarter of a second
 * in the quickstart's Chromium, where a group's end gates the next group) waits ~10 ms. The env slot is
 * released before this wait.
 */
const INDEX_LINGER_FRACTION = 1 / 20;
const INDEX_LINGER_MAX_MS = 2_000;

function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (!signal?.aborted) return;
  const reason: unknown = signal.reason;
  throw reason instanceof CancelledFailure ? reason : new CancelledFailure('episode cancelled');
}

function validate(raw: unknown): { input: RunEpisodeParsed; task: TaskSpec } {
  const parsed = RunEpisodeInputSchema.safeParse(raw);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw ApplicationFailure.create({
      type: 'InvalidEpisodeInput',
      message: `invalid runEpisode input: ${msg}`,
      nonRetryable: true,
    });
  }
  try {
    return {
      input: parsed.data,
      task: parseTaskSpec(parsed.data.task, `task of trajectory ${parsed.data.trajectoryId}`),
    };
  } catch (err) {
    throw toActivityFailure(err);
  }
}

export async function runEpisodeCore(
  deps: EnvActivityDeps,
  raw: RunEpisodeInput,
  hooks: EpisodeHooks
): Promise<RunEpisodeResult> {
  const now = deps.now ?? Date.now;
  const { input, task } = validate(raw);
  const factory = deps.policies[input.policy.kind];
  if (!factory) {
    throw ApplicationFailure.create({
      type: 'InvalidEpisodeInput',
      message: `unknown policy kind "${input.policy.kind}" (this worker has: ${Object.keys(deps.policies).join(', ')})`,
      nonRetryable: true,
    });
  }
  const maxSteps = input.maxSteps ?? task.maxSteps;
  const { campaignId, trajectoryId } = input;
  const manifestKey = keys.trajectoryManifest(campaignId, trajectoryId);
  const stepsKey = keys.trajectorySteps(campaignId, trajectoryId, hooks.attempt);
  const clock = new EpisodeClock(now);
  const startedAtMonotonic = performance.now();
  /** The index write of the committed manifest, awaited once the env slot is released. */
  let indexed: Promise<void> | undefined;
  let succeeded = false;

  let env: GuiEnv;
  try {
    // From here on the gate keeps the attempt alive, also while it waits for a slot.
    hooks.heartbeat({ trajectoryId, step: 0 });
    env = await deps.pool.acquire(hooks.signal);
    clock.acquired();
  } catch (err) {
    throwIfCancelled(hooks.signal);
    throw toActivityFailure(err);
  }

  const steps: StepRecord[] = [];
  const uploads: Promise<ObjectRef>[] = [];
  let instruction = '';
  let fields: string[] = [];
  let policy: EpisodePolicy | undefined;
  let broken = false;
  let result: RunEpisodeResult;
  const envKind = env.kind;
  let released = false;
  /**
   * Hands the env back (once). Called as soon as the episode is done with it, before its records go up: on
   * a worker with more activity slots than envs the next episode takes the env while this one writes.
   */
  const releaseEnv = async () => {
    if (released) return;
    released = true;
    await policy?.close?.().catch(() => undefined);
    await deps.pool.release(env, { broken });
  };

  const writeTrajectory = async (status: TrajectoryManifest['status'], reward: number | null, error?: string) => {
    clock.writeStarted();
    // steps.jsonl goes up while the last screenshot uploads finish; the manifest (the commit record, which
    // names the steps' sha256) follows once both are stored.
    const stepsBody = serializeJsonLines(steps, StepRecordSchema);
    const stepsWrite = clock.stepsWrite(deps.store.putBytes(stepsKey, stepsBody, 'application/x-ndjson'));
    stepsWrite.catch(() => undefined);
    await clock.uploads(Promise.all([...uploads, stepsWrite]));
    const stepsSha256 = sha256Hex(stepsBody);
    const timing: EpisodeTiming = clock.record();
    const versions = steps.map((s) => s.policyVersion);
    const manifest: TrajectoryManifest = {
      schemaVersion: 1,
      trajectoryId,
      campaignId,
      taskId: task.id,
      groupId: input.groupId,
      seed: input.seed,
      instruction,
      fields,
      reward,
      status,
      numSteps: steps.length,
      maxSteps,
      minPolicyVersion: versions.length ? Math.min(...versions) : (input.policy.versionHint ?? 0),
      maxPolicyVersion: versions.length ? Math.max(...versions) : (input.policy.versionHint ?? 0),
      stepsKey,
      stepsSha256,
      source: input.source,
      envKind,
      createdAt: now(),
      ...(error ? { error: error.slice(0, 2000) } : {}),
      timing,
    };
    // What is stored is what this attempt reports: an ok manifest another attempt committed first wins.
    const committed = await commitManifest(deps.store, manifestKey, manifest);
    // The viewer's per-task/version/hour index gets what is stored, also when another attempt stored it
    // (a retry after this write failed must still index it; readers keep one entry per id). Awaited once
    // the env slot is released.
    const lingerMs = Math.min(INDEX_LINGER_MAX_MS, (performance.now() - startedAtMonotonic) * INDEX_LINGER_FRACTION);
    indexed = indexTrajectory(deps.store, committed.manifest, now(), { lingerMs });
    indexed.catch(() => undefined); // until then not an unhandled rejection
    return committed.manifest;
  };

  try {
    const reset = await clock.env(() => env.reset(task, input.seed));
    instruction = reset.instruction;
    fields = [...reset.fields];
    policy = await clock.act(async () =>
      factory({
        env,
        task,
        seed: input.seed,
        endpoints: input.policy.endpoints,
        ...(input.policy.versionHint !== undefined ? { versionHint: input.policy.versionHint } : {}),
        options: input.policy.options,
      })
    );
    const active = policy;
    let obs: Observation = reset.observation;
    const history: PolicyHistoryItem[] = [];
    for (let step = 0; step < maxSteps; step++) {
      throwIfCancelled(hooks.signal);
      hooks.heartbeat({ trajectoryId, step });
      const startedAt = now();
      // Screenshot upload runs alongside acting; content addressing makes a group's shared first frame one object.
      const observationKey = keys.screenshot(sha256Hex(obs.png));
      const upload = deps.store.putScreenshot(obs.png);
      // Awaited (and its failure reported) in writeTrajectory; until then a MinIO outage must not be an
      // unhandled rejection, which would crash the whole env worker.
      upload.catch(() => undefined);
      uploads.push(upload);
      let decision: PolicyDecision;
      try {
        decision = await clock.act(() =>
          active.act(
            {
              png: obs.png,
              width: obs.width,
              height: obs.height,
              instruction,
              fields: reset.fields,
              step,
              history: [...history],
            },
            { seed: stepSeed(trajectoryId, step, hooks.attempt), temperature: input.policy.temperature }
          )
        );
      } catch (err) {
        if (err instanceof EnvError || err instanceof PolicyUnavailableError) throw err;
        throw new PolicyUnavailableError(
          `policy "${input.policy.kind}" failed: ${err instanceof Error ? err.message : String(err)}`
        );
      }
      // A VLM step's prompt record (content-addressed) goes up with the screenshots: the trainer re-scores from it.
      const promptUpload =
        decision.prompt && deps.store.putBytes(decision.prompt.key, decision.prompt.body, 'application/json');
      promptUpload?.catch(() => undefined);
      if (promptUpload) uploads.push(promptUpload);
      // A malformed model output is a failed step, not an error: the episode goes on by the task's rules.
      // A response with several actions runs them all within the step, stopping at a failure or an end.
      const action = decision.action;
      const sequence = decision.actions?.length ? decision.actions : action ? [action] : [];
      const res =
        sequence.length > 0
          ? await clock.env(() => runActionSequence(sequence, (a) => env.step(a)))
          : { done: false, actionOk: false, error: decision.parseError ?? 'unparseable action' };
      steps.push({
        schemaVersion: 1,
        trajectoryId,
        step,
        observationKey,
        observationSize: { width: obs.width, height: obs.height },
        action: decision.action,
        actionText: decision.actionText.slice(0, 20_000),
        ...(decision.actionIndex !== undefined ? { actionIndex: decision.actionIndex } : {}),
        ...(decision.parseError !== undefined ? { parseError: decision.parseError } : {}),
        behaviourLogProb: decision.logProb,
        ...(decision.tokenLogProbs ? { tokenLogProbs: decision.tokenLogProbs } : {}),
        entropy: decision.entropy,
        policyVersion: decision.policyVersion,
        ...(decision.policyServer ? { policyServer: decision.policyServer } : {}),
        ...(decision.responseTokenIds ? { responseTokenIds: decision.responseTokenIds } : {}),
        ...(decision.prompt ? { promptKey: decision.prompt.key } : {}),
        actionOk: res.actionOk,
        startedAt,
        endedAt: now(),
      });
      history.push({ step, action: decision.action, actionText: decision.actionText, actionOk: res.actionOk });
      if (res.done) break;
      obs = await clock.env(() => env.observe());
    }
    const ev = await clock.env(() => env.evaluate());
    await releaseEnv();
    const manifest = await writeTrajectory('ok', ev.reward);
    succeeded = true;
    result = {
      trajectoryId,
      taskId: task.id,
      seed: input.seed,
      manifestKey,
      reward: manifest.reward,
      status: manifest.status,
      numSteps: manifest.numSteps,
      minPolicyVersion: manifest.minPolicyVersion,
      maxPolicyVersion: manifest.maxPolicyVersion,
      envKind,
      ...(manifest.instruction ? { instructionKey: instructionKeyOf(manifest.instruction) } : {}),
    };
  } catch (err) {
    // Only env-side trouble (or the unknown) condemns the env; a policy, storage or task problem does not.
    broken = !(
      err instanceof CancelledFailure ||
      err instanceof PolicyUnavailableError ||
      err instanceof StorageUnavailableError ||
      err instanceof TaskConfigError ||
      err instanceof PolicyConfigError
    );
    await releaseEnv();
    // Best effort: a record of the failed attempt (reward null) helps debugging; a retry overwrites it.
    await writeTrajectory(failureStatus(err), null, err instanceof Error ? err.message : String(err)).catch(
      () => undefined
    );
    throw toActivityFailure(err);
  } finally {
    await releaseEnv();
    // A failure record's index entry is best effort, like the record itself.
    if (!succeeded) await indexed?.catch(() => undefined);
  }
  // An ok episode is reported only once its index entry is stored (a failed write retries the episode:
  // its ok manifest stands and the retry indexes it).
  if (indexed) await indexed.catch((err: unknown) => Promise.reject(toActivityFailure(err)));
  return result;
}

/** One episode's outcome inside a batch: a result, or the typed failure Temporal would have seen. */
export type EpisodeOutcome =
  | { ok: true; result: RunEpisodeResult }
  | { ok: false; trajectoryId: string; errorType: string; message: string; nonRetryable: boolean };

export interface EnvActivities {
  runEpisode(input: RunEpisodeInput): Promise<RunEpisodeResult>;
  /**
   * The episodes of one GRPO group in one activity (they run concurrently over this worker's env slots):
   * an eighth of the Temporal round trips of one activity per episode. A failed episode is reported in
   * its outcome, not thrown, so the others' results are kept; the workflow retries it on its own.
   */
  runEpisodes(input: { episodes: RunEpisodeInput[] }): Promise<EpisodeOutcome[]>;
}

/** Activities of the env worker (Temporal's dependency-injection pattern: `activities: createEnvActivities(deps)`). */
export function createEnvActivities(deps: EnvActivityDeps): EnvActivities {
  return {
    async runEpisode(input: RunEpisodeInput): Promise<RunEpisodeResult> {
      const hooks = temporalHooks();
      try {
        return await runEpisodeCore(deps, input, hooks);
      } finally {
        hooks.dispose();
      }
    },
    async runEpisodes(input: { episodes: RunEpisodeInput[] }): Promise<EpisodeOutcome[]> {
      const ctx = Context.current();
      const progress: Record<string, number> = {};
      const beat = () => ctx.heartbeat({ steps: progress });
      // Episodes may wait for a free env slot; a timer keeps heartbeats (and cancellation) flowing meanwhile.
      const timer = setInterval(beat, 5_000);
      try {
        const hooks: EpisodeHooks = {
          heartbeat: (d) => {
            progress[d.trajectoryId] = d.step;
            beat();
          },
          signal: ctx.cancellationSignal,
          attempt: ctx.info.attempt,
        };
        const settled = await Promise.allSettled((input.episodes ?? []).map((e) => runEpisodeCore(deps, e, hooks)));
        return settled.map((r, i): EpisodeOutcome => {
          if (r.status === 'fulfilled') return { ok: true, result: r.value };
          if (r.reason instanceof CancelledFailure) throw r.reason;
          const failure = toActivityFailure(r.reason);
          const af = failure instanceof ApplicationFailure ? failure : undefined;
          return {
            ok: false,
            trajectoryId: String((input.episodes[i] as { trajectoryId?: unknown }).trajectoryId ?? i),
            errorType: af?.type ?? failure.name,
            message: failure.message.slice(0, 2000),
            nonRetryable: af?.nonRetryable ?? false,
          };
        });
      } finally {
        clearInterval(timer);
      }
    },
  };
}
