/**
 * Maps failures to Temporal ApplicationFailures. Env, storage and policy failures are retryable (the
 * retry gets a fresh env) and carry their class name as the failure type, so workflows can tell them
 * apart; a bad task or bad input is non-retryable. None of them ever becomes a reward.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { EnvError } from '../../envs/errors';
import { StorageUnavailableError } from '../../storage/errors';
import { TaskConfigError } from '../../tasks/errors';
import { PolicyConfigError, PolicyUnavailableError } from './policy';

export const NON_RETRYABLE_ENV_FAILURES = ['TaskConfigError', 'InvalidEpisodeInput'] as const;

export function toActivityFailure(err: unknown): Error {
  if (err instanceof ApplicationFailure || err instanceof CancelledFailure) return err;
  if (err instanceof TaskConfigError) {
    return ApplicationFailure.create({ type: 'TaskConfigError', message: err.message, nonRetryable: true, cause: err });
  }
  if (err instanceof PolicyConfigError) {
    return ApplicationFailure.create({
      type: 'InvalidEpisodeInput',
      message: err.message,
      nonRetryable: true,
      cause: err,
    });
  }
  const retryable = (type: string, e: Error) =>
    ApplicationFailure.create({ type, message: e.message, nonRetryable: false, cause: e });
  if (err instanceof EnvError) return retryable(err.name, err);
  if (err instanceof StorageUnavailableError) return retryable('StorageUnavailableError', err);
  if (err instanceof PolicyUnavailableError) return retryable('PolicyUnavailableError', err);
  const e = err instanceof Error ? err : new Error(String(err));
  return retryable('EnvWorkerError', e);
}

/** Episode status recorded for a failed attempt (reward stays null). */
export function failureStatus(err: unknown): 'env_error' | 'policy_error' | 'cancelled' {
  if (err instanceof CancelledFailure) return 'cancelled';
  if (err instanceof PolicyUnavailableError) return 'policy_error';
  return 'env_error';
}
