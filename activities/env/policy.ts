/**
 * How an episode reaches its policy. The embedded ONNX client and the UI-TARS (vLLM) client implement
 * EpisodePolicy too; the env worker only knows this interface. Policies are created per episode by a
 * factory registered under a kind name (input.policy.kind), so per-episode state (history, RNG) is easy.
 */
import type { CanonicalAction } from '../../schemas/actions';
import type { GuiEnv } from '../../envs/types';
import type { TaskSpec } from '../../tasks/schema';

export interface PolicyHistoryItem {
  step: number;
  action: CanonicalAction | null;
  actionText: string;
  actionOk: boolean;
}

export interface PolicyObservation {
  png: Uint8Array;
  width: number;
  height: number;
  instruction: string;
  fields: string[];
  step: number;
  history?: PolicyHistoryItem[];
}

export interface PolicyActOptions {
  /** Per-step seed (episode seed mixed with step and attempt) so sampling is reproducible. */
  seed: number;
  temperature: number;
}

export interface PolicyDecision {
  /** null when the model output did not parse: the step counts as a failed action. */
  action: CanonicalAction | null;
  /**
   * Every runnable action of a response that holds several (UI-TARS may answer "click(…)\n\ntype(…)"),
   * in order; the step runs them all (actions/sequence.ts). Absent: the step runs `action` alone.
   */
  actions?: CanonicalAction[];
  /** UI-TARS text (or the raw model output when it did not parse). */
  actionText: string;
  actionIndex?: number;
  logProb: number;
  tokenLogProbs?: number[];
  entropy: number;
  policyVersion: number;
  policyServer?: string;
  parseError?: string;
  /** VLM: the response's token ids as vLLM generated them (one per tokenLogProbs entry), for re-scoring. */
  responseTokenIds?: number[];
  /** VLM: the prompt record vLLM sampled from (vlm/prompt-record.ts); the env activity stores it. */
  prompt?: { key: string; body: Uint8Array };
}

export interface EpisodePolicy {
  act(obs: PolicyObservation, opts: PolicyActOptions): Promise<PolicyDecision>;
  close?(): Promise<void>;
}

export interface PolicyContext {
  env: GuiEnv;
  task: TaskSpec;
  seed: number;
  /** Policy endpoints and options from the episode input (e.g. policy server URLs). */
  endpoints: string[];
  versionHint?: number;
  options: Record<string, unknown>;
}

export type PolicyFactory = (ctx: PolicyContext) => EpisodePolicy | Promise<EpisodePolicy>;

/** The policy is unreachable or failed (not a bad action): retryable infrastructure failure. */
/**
 * The episode's policy options are invalid (e.g. `policy.options.coordModel`): bad input, so the
 * episode fails non-retryably (InvalidEpisodeInput) and the env is not blamed.
 */
export class PolicyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyConfigError';
  }
}

export class PolicyUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyUnavailableError';
  }
}
