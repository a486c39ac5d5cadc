/**
 * One OSWorld episode on a VM leased from a GUI-Docker-Env cluster, DART-GUI's way (dart-spec.md §2.2):
 * reset = lease a VM (quota check, fallback over env servers) → OSWorld task setup in the sidecar →
 * settle → first screenshot, up to `initAttempts` times with the VM released between attempts; step =
 * canonical action → pyautogui code → the VM's /execute → settle pause; evaluate = OSWorld's evaluator
 * in the sidecar. The VM is released by `releaseVm` (the pool calls it after every episode, whatever
 * happened), by a failed reset, and by close.
 */
import { renderPyautogui } from '../../actions/pyautogui';
import type { CanonicalAction } from '../../schemas/actions';
import type { TaskSpec } from '../../tasks/schema';
import { EnvCrashedError, EnvError, EnvUnavailableError, TaskConfigError } from '../errors';
import type { EvalResult, GuiEnv, Observation, ResetResult, StepResult } from '../types';
import type { OsworldEnvSettings } from './config';
import { leaseVm, releaseVm, type VmLease } from './env-server';
import { EnvServerQuotaError } from './errors';
import { sleep } from './http';
import { runEvaluator, runTaskSetup } from './sidecar-client';
import { execute, screenshot } from './vm';

export class OsworldEnv implements GuiEnv {
  readonly kind = 'osworld';
  private lease: VmLease | null = null;
  private task: TaskSpec | null = null;
  /** DesktopEnv's action_history[-1]: `infeasible` and a final FAIL depend on it. */
  private lastAction: string | null = null;
  private dead = false;
  /** Leases released by this env (tests and logs). */
  readonly released: string[] = [];

  constructor(
    readonly id: string,
    private readonly s: OsworldEnvSettings
  ) {}

  get broken(): boolean {
    return this.dead;
  }

  private leased(): VmLease {
    if (!this.lease || !this.task) throw new EnvCrashedError(`${this.id}: no VM leased (reset first)`, this.id);
    return this.lease;
  }

  /** Marks the env broken on any env failure (the pool replaces it), then rethrows. */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof EnvError) this.dead = true;
      throw err;
    }
  }

  async reset(task: TaskSpec, _seed: number): Promise<ResetResult> {
    // OSWorld tasks are deterministic; the seed only separates GRPO episodes (their policies sample).
    return this.guard(async () => {
      await this.releaseVm();
      this.task = task;
      this.lastAction = null;
      let last: unknown;
      for (let attempt = 1; attempt <= this.s.initAttempts; attempt++) {
        if (attempt > 1) await sleep(this.s.initRetryDelayMs);
        try {
          this.lease = await leaseVm(this.s, this.id);
          const call = { lease: this.lease, taskId: task.id, envId: this.id };
          await runTaskSetup(this.s, call, task.config);
          await sleep(this.s.settleMs);
          const observation = await screenshot(this.s, this.lease, this.id);
          return { instruction: task.instruction, fields: [], observation };
        } catch (err) {
          last = err;
          await this.releaseVm();
          // A bad task never gets better; a cluster out of quota is the pool's problem, not this attempt's.
          if (err instanceof TaskConfigError || err instanceof EnvServerQuotaError || !(err instanceof EnvError))
            throw err;
        }
      }
      throw last instanceof Error ? last : new EnvUnavailableError(`${this.id}: reset failed`, this.id);
    });
  }

  async observe(): Promise<Observation> {
    return this.guard(() => screenshot(this.s, this.leased(), this.id));
  }

  async step(action: CanonicalAction): Promise<StepResult> {
    return this.guard(async () => {
      const lease = this.leased();
      const code = renderPyautogui(action, this.s.screen);
      this.lastAction = code;
      // DesktopEnv.step: WAIT sleeps the pause before and after; DONE and FAIL end the episode unexecuted.
      if (code === 'WAIT') {
        await sleep(this.s.pauseMs * 2);
        return { done: false, actionOk: true };
      }
      if (code === 'DONE' || code === 'FAIL') return { done: true, actionOk: true };
      const r = await execute(this.s, lease, code, this.id);
      await sleep(this.s.pauseMs);
      return { done: false, actionOk: r.ok, ...(r.error !== undefined ? { error: r.error } : {}) };
    });
  }

  async evaluate(): Promise<EvalResult> {
    return this.guard(async () => {
      const lease = this.leased();
      const task = this.task!;
      const reward = await runEvaluator(
        this.s,
        { lease, taskId: task.id, envId: this.id },
        task.evaluator,
        this.lastAction
      );
      return { reward, done: true };
    });
  }

  /** DELETE /emulators/{id} of the current lease, if any. A failed release is logged, never thrown: the episode's outcome stands. */
  async releaseVm(): Promise<void> {
    const lease = this.lease;
    this.lease = null;
    if (!lease) return;
    try {
      await releaseVm(this.s, lease, this.id);
      this.released.push(lease.emulatorId);
    } catch (err) {
      console.warn(`[osworld] ${this.id}: could not release emulator ${lease.emulatorId}: ${(err as Error).message}`);
    }
  }

  async close(): Promise<void> {
    await this.releaseVm();
  }
}
