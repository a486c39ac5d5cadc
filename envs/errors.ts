/**
 * Typed env failures. An env failure is never a task outcome: the episode is retried on a fresh env
 * and no reward is recorded (a fake 0 would poison GRPO advantages). TaskConfigError is the one
 * permanent failure (a bad task file cannot be fixed by retrying).
 */
export { TaskConfigError } from '../tasks/errors';

export abstract class EnvError extends Error {
  abstract readonly retryable: boolean;
  constructor(
    message: string,
    readonly envId?: string
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The browser, page, VM or remote server died; the env must be replaced. */
export class EnvCrashedError extends EnvError {
  readonly retryable = true;
}

/** An env operation did not finish in time; the env is suspect and is replaced. */
export class EnvTimeoutError extends EnvError {
  readonly retryable = true;
}

/** No env could be obtained (pool closed, remote server unreachable or refusing). */
export class EnvUnavailableError extends EnvError {
  readonly retryable = true;
}

/** The remote side answered something that does not follow the protocol. */
export class EnvProtocolError extends EnvError {
  readonly retryable = true;
}

export const ENV_ERROR_TYPES = [
  'EnvCrashedError',
  'EnvTimeoutError',
  'EnvUnavailableError',
  'EnvProtocolError',
  'TaskConfigError',
] as const;

/** Runs `p` with a deadline; on expiry rejects with EnvTimeoutError (the operation itself is abandoned). */
export async function withTimeout<T>(p: Promise<T>, ms: number, what: string, envId?: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new EnvTimeoutError(`${what} timed out after ${ms} ms`, envId)), ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
