/** Task configuration errors are permanent: retrying cannot fix a bad file (non-retryable upstream). */
export class TaskConfigError extends Error {
  constructor(
    message: string,
    readonly file?: string,
    readonly field?: string
  ) {
    super(message);
    this.name = 'TaskConfigError';
  }
}
