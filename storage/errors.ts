/** Typed storage errors: every one names the object key (or endpoint) so nothing fails anonymously. */

export class ObjectNotFoundError extends Error {
  constructor(
    readonly key: string,
    readonly bucket: string
  ) {
    super(`object not found: s3://${bucket}/${key}`);
    this.name = 'ObjectNotFoundError';
  }
}

/** The object exists but its bytes are not what was written: truncated, altered, or unparseable. */
export class CorruptObjectError extends Error {
  constructor(
    readonly key: string,
    readonly reason: string
  ) {
    super(`corrupt object ${key}: ${reason}`);
    this.name = 'CorruptObjectError';
  }
}

export class StorageUnavailableError extends Error {
  constructor(
    readonly endpoint: string,
    cause: unknown
  ) {
    super(
      `object storage at ${endpoint} is unreachable (${cause instanceof Error ? cause.message : String(cause)}). ` +
        'Start it with `npm run infra:up`, or check S3_ENDPOINT and credentials.'
    );
    this.name = 'StorageUnavailableError';
  }
}
