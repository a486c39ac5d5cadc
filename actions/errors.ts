/**
 * A malformed model output is data, not an exception: the parser returns this error as a value so a
 * bad string becomes a failed step (recorded with its text), never a crashed worker.
 */
export type ActionParseErrorCode =
  'empty' | 'no_action' | 'unknown_action' | 'bad_arguments' | 'bad_coordinates' | 'out_of_range';

export class ActionParseError extends Error {
  constructor(
    readonly code: ActionParseErrorCode,
    message: string,
    readonly text: string
  ) {
    super(message);
    this.name = 'ActionParseError';
  }
}
