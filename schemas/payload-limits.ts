/**
 * Temporal payload limits, checked before anything is sent (Node-free: workflows, workers and the client
 * share it). The server refuses a payload over 2 MiB (`limit.blobSize.error`) and a gRPC message over
 * 4 MB; its failure arrives late and names neither the payload nor the fix. dartflow refuses earlier, at
 * a slightly lower bound so the metadata and the rest of the request fit, with an error that says which
 * payload it was, how big it is, and to pass a MinIO reference instead (claim check).
 */

/** Temporal's default per-payload error limit (`limit.blobSize.error`). */
export const TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024;
/** Temporal's default gRPC message limit (a request carrying several payloads). */
export const TEMPORAL_GRPC_LIMIT_BYTES = 4 * 1024 * 1024;
/** dartflow's bound for one payload: 64 KiB below the server's, for metadata and headers. */
export const PAYLOAD_GUARD_BYTES = TEMPORAL_PAYLOAD_LIMIT_BYTES - 64 * 1024;
/** dartflow's bound for all payloads of one call together (args of a start, an activity, an update). */
export const REQUEST_GUARD_BYTES = TEMPORAL_GRPC_LIMIT_BYTES - 256 * 1024;

export class PayloadTooLargeError extends Error {
  constructor(
    readonly what: string,
    readonly bytes: number,
    readonly limit: number
  ) {
    super(
      `${what} is ${formatBytes(bytes)} as a Temporal payload, over dartflow's ${formatBytes(limit)} limit ` +
        `(Temporal refuses payloads over ${formatBytes(TEMPORAL_PAYLOAD_LIMIT_BYTES)} and requests over ` +
        `${formatBytes(TEMPORAL_GRPC_LIMIT_BYTES)}): store large data in MinIO and pass its ObjectRef instead`
    );
    this.name = 'PayloadTooLargeError';
  }
}

export function formatBytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(2)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

/** UTF-8 length of a string without TextEncoder/Buffer (not every sandbox has them). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** Bytes of `value` under the default JSON payload converter (binary values count their length). */
export function payloadBytes(value: unknown): number {
  if (value === undefined) return 0;
  if (value instanceof Uint8Array) return value.byteLength;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    return 0; // not JSON-serializable: the converter itself reports that, with its own error
  }
  return json === undefined ? 0 : utf8Length(json);
}

/**
 * Throws PayloadTooLargeError when one of `values` (the arguments of one call, or a single result) is over
 * the per-payload bound, or all of them together are over the request bound. `what` names the call.
 */
export function assertPayloadsFit(what: string, values: readonly unknown[]): void {
  let total = 0;
  values.forEach((v, i) => {
    const bytes = payloadBytes(v);
    total += bytes;
    if (bytes > PAYLOAD_GUARD_BYTES) {
      const name = values.length > 1 ? `${what} (argument ${i + 1})` : what;
      throw new PayloadTooLargeError(name, bytes, PAYLOAD_GUARD_BYTES);
    }
  });
  if (total > REQUEST_GUARD_BYTES)
    throw new PayloadTooLargeError(`${what} (all arguments)`, total, REQUEST_GUARD_BYTES);
}
