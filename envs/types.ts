/**
 * The one interface every environment implements (browser pages, remote env servers, simulated
 * latency envs), and the pool through which env workers lease them.
 */
import type { CanonicalAction } from '../schemas/actions';
import type { TaskSpec } from '../tasks/schema';

export interface Observation {
  /** PNG bytes of the screen. */
  png: Uint8Array;
  width: number;
  height: number;
}

export interface ResetResult {
  instruction: string;
  /** Task fields (e.g. the word to type): the embedded policy's type_field[k] tokens type these. */
  fields: string[];
  observation: Observation;
}

export interface StepResult {
  /** The episode is over (task ended it, or the agent said finished / call_user). */
  done: boolean;
  /** Whether the action was executed; an unexecutable action (bad key name) is a failed step, not a crash. */
  actionOk: boolean;
  error?: string;
}

export interface EvalResult {
  /** Binary task reward: 1 success, 0 failure. Only meaningful when the env is healthy. */
  reward: number;
  done: boolean;
  reason?: string;
}

export interface GuiEnv {
  readonly kind: string;
  readonly id: string;
  reset(task: TaskSpec, seed: number): Promise<ResetResult>;
  observe(): Promise<Observation>;
  step(action: CanonicalAction): Promise<StepResult>;
  evaluate(): Promise<EvalResult>;
  /** The task's own next correct action (oracle demos, tests); absent when the env cannot know it. */
  oracle?(): Promise<CanonicalAction | null>;
  close(): Promise<void>;
}

export interface PoolStats {
  kind: string;
  slots: number;
  busy: number;
  waiting: number;
  replaced: number;
}

/** A fixed number of env slots. `release(env, {broken: true})` discards the env; the slot gets a fresh one. */
export interface EnvPool {
  readonly kind: string;
  readonly slots: number;
  acquire(signal?: AbortSignal): Promise<GuiEnv>;
  release(env: GuiEnv, opts?: { broken?: boolean }): Promise<void>;
  stats(): PoolStats;
  close(): Promise<void>;
}
