/**
 * What a failed page view tells the reader: an HTTP status, a title and a sentence naming the id or
 * object at fault. Storage errors map to it here, so every page reports a deleted object, a corrupt
 * record or an unreachable MinIO the same way (and never as a blank page).
 */
import { CorruptObjectError, ObjectNotFoundError, StorageUnavailableError } from '../storage/errors';

export class ViewerError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string
  ) {
    super(`${title}: ${detail}`);
    this.name = 'ViewerError';
  }
}

export const notFound = (title: string, detail: string): ViewerError => new ViewerError(404, title, detail);

/** Ids become key segments: refuse what `safeSegment` would have to rewrite, so a URL names one object. */
const ID = /^[A-Za-z0-9._=-]{1,200}$/;
export function checkId(id: string, what: string): string {
  if (!ID.test(id) || /^\.+$/.test(id))
    throw notFound(`No such ${what}`, `"${id}" is not a valid ${what} id (letters, digits, ".", "_", "=", "-").`);
  return id;
}

export function toViewerError(err: unknown, what = 'object'): ViewerError {
  if (err instanceof ViewerError) return err;
  if (err instanceof ObjectNotFoundError)
    return new ViewerError(
      404,
      `The ${what} is missing`,
      `${err.key} does not exist in bucket ${err.bucket} (deleted, or never written).`
    );
  if (err instanceof CorruptObjectError)
    return new ViewerError(500, `The ${what} is corrupt`, `${err.key}: ${err.reason}`);
  if (err instanceof StorageUnavailableError) return new ViewerError(503, 'MinIO is unreachable', err.message);
  return new ViewerError(500, 'Internal error', err instanceof Error ? err.message : String(err));
}
