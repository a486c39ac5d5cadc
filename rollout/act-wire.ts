/**
 * Act calls on the wire (format in rollout/api.ts): packing on the client, unpacking and the `encoded`
 * observations on the server. Encoded observations carry the policy's input tensor, encoded by the
 * sender (the env worker holds the screenshot), so the server neither decodes PNGs nor parses big
 * base64 strings: it reads a small JSON header and views the float32 data in place.
 */
import os from 'node:os';
import { encodeScreenshot } from '../policy/observation';
import { IMAGE_CHANNELS } from '../policy/spec';
import { BINARY_ACT_CONTENT_TYPE, BINARY_ACT_MAGIC, type ActRequest, type EncodedScreenshot } from './api';
import { BadActRequestError } from './engine';

const HOST_IS_LITTLE_ENDIAN = os.endianness() === 'LE';

/** An encoded screenshot on the client side: the tensor itself (sent as binary) instead of base64. */
export interface EncodedImage {
  /** The screenshot's own size in pixels (the coordinate space of actionText). */
  width: number;
  height: number;
  /** Side S of the encoded image ([3,S,S]). */
  size: number;
  /** `encodeScreenshot(png, {imageSize: size})`. */
  data: Float32Array;
}

type WireObservation = ActRequest['observation'];

/** What PolicyServerClient.act/actMany take: a wire request whose `encoded` may hold the tensor itself. */
export type OutgoingActRequest = Omit<ActRequest, 'observation'> & {
  observation: Omit<WireObservation, 'encoded'> & { encoded?: EncodedImage | EncodedScreenshot };
};

/** A PNG screenshot → the encoded form for a policy whose input side is `size` (exactly encodeScreenshot). */
export function encodeScreenshotImage(
  png: Uint8Array,
  screen: { width: number; height: number },
  size: number
): EncodedImage {
  return { width: screen.width, height: screen.height, size, data: encodeScreenshot(png, { imageSize: size }) };
}

/** float32 values → little-endian bytes (a view, no copy, on little-endian hosts). */
function float32Bytes(values: Float32Array): Uint8Array {
  if (HOST_IS_LITTLE_ENDIAN) return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes;
}

/** float32 values → little-endian base64 (the JSON form of `encoded.float32Base64`). */
export function float32ToBase64(values: Float32Array): string {
  const b = float32Bytes(values);
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
}

const isImage = (e: EncodedImage | EncodedScreenshot | undefined): e is EncodedImage =>
  e !== undefined && 'data' in e && e.data instanceof Float32Array;

/** The body of one act call: binary when any observation carries its tensor, JSON otherwise. */
export function packActCall(requests: OutgoingActRequest[]): { body: Uint8Array | string; contentType: string } {
  if (!requests.some((r) => isImage(r.observation.encoded)))
    return { body: JSON.stringify({ requests }), contentType: 'application/json' };
  const tensors: Uint8Array[] = [];
  const header = {
    requests: requests.map((r) => {
      const e = r.observation.encoded;
      if (!isImage(e)) return r;
      tensors.push(float32Bytes(e.data));
      return { ...r, observation: { ...r.observation, encoded: { width: e.width, height: e.height, size: e.size } } };
    }),
  };
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const dataStart = Math.ceil((8 + json.byteLength) / 4) * 4;
  const total = dataStart + tensors.reduce((n, t) => n + t.byteLength, 0);
  const body = Buffer.alloc(total);
  body.write(BINARY_ACT_MAGIC, 0, 'latin1');
  body.writeUInt32LE(json.byteLength, 4);
  json.copy(body, 8);
  let at = dataStart;
  for (const t of tensors) {
    body.set(t, at);
    at += t.byteLength;
  }
  return { body, contentType: BINARY_ACT_CONTENT_TYPE };
}

/** The float32 data of a binary body, handed out in request order to the encoded observations that need it. */
export class TensorSection {
  private at = 0;

  constructor(private readonly bytes: Buffer | undefined) {}

  take(byteLength: number, field: string): Buffer {
    const available = this.bytes ? this.bytes.byteLength - this.at : 0;
    if (!this.bytes)
      throw new BadActRequestError(
        `${field}.float32Base64 is required in a JSON body (or send the binary form, ${BINARY_ACT_CONTENT_TYPE})`,
        'bad_encoded_observation'
      );
    if (available < byteLength)
      throw new BadActRequestError(
        `${field}: the body's tensor section has ${available} bytes left, this observation needs ${byteLength}`,
        'bad_encoded_observation'
      );
    const out = this.bytes.subarray(this.at, this.at + byteLength);
    this.at += byteLength;
    return out;
  }

  /** Bytes nobody took: the header and the data do not agree. */
  get leftover(): number {
    return this.bytes ? this.bytes.byteLength - this.at : 0;
  }
}

/** A binary act body → its JSON header (not yet validated) and its tensor section. */
export function unpackBinaryActCall(body: Buffer): { header: unknown; tensors: TensorSection } {
  if (body.byteLength < 8 || body.toString('latin1', 0, 4) !== BINARY_ACT_MAGIC)
    throw new BadActRequestError(
      `binary act body must start with "${BINARY_ACT_MAGIC}" and a u32 header length`,
      'bad_binary_body'
    );
  const headerLength = body.readUInt32LE(4);
  if (8 + headerLength > body.byteLength)
    throw new BadActRequestError(
      `binary act body: header length ${headerLength} exceeds the body (${body.byteLength} bytes)`,
      'bad_binary_body'
    );
  let header: unknown;
  try {
    header = JSON.parse(body.toString('utf8', 8, 8 + headerLength));
  } catch {
    throw new BadActRequestError('binary act body: the header is not JSON', 'bad_binary_body');
  }
  const dataStart = Math.ceil((8 + headerLength) / 4) * 4;
  return { header, tensors: new TensorSection(body.subarray(Math.min(dataStart, body.byteLength))) };
}

/** Little-endian float32 bytes → Float32Array: a view when aligned on a little-endian host, else a copy. */
function toFloat32(bytes: Buffer): Float32Array {
  if (HOST_IS_LITTLE_ENDIAN && bytes.byteOffset % 4 === 0)
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const out = new Float32Array(bytes.byteLength / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/**
 * An `encoded` observation → its float32 values, checked against the served input size before anything
 * is batched. `field` is the request's path (e.g. `requests.3.observation.encoded`), so a 400 names the
 * exact field and says what to send instead. The values themselves are checked by the engine.
 */
export function decodeEncodedScreenshot(
  e: EncodedScreenshot,
  imageSize: number,
  field: string,
  tensors: TensorSection
): { image: Float32Array; width: number; height: number } {
  if (e.size !== imageSize)
    throw new BadActRequestError(
      `${field}.size is ${e.size}, but this server's policy takes ${imageSize}×${imageSize} images: encode with size ${imageSize} (the answers' inputSize) or send the PNG`,
      'input_size_mismatch'
    );
  const want = IMAGE_CHANNELS * imageSize * imageSize * 4;
  if (e.float32Base64 === undefined)
    return { image: toFloat32(tensors.take(want, field)), width: e.width, height: e.height };
  const bytes = Buffer.from(e.float32Base64, 'base64');
  if (bytes.byteLength !== want)
    throw new BadActRequestError(
      `${field}.float32Base64 decodes to ${bytes.byteLength} bytes; size ${imageSize} needs ${IMAGE_CHANNELS}×${imageSize}×${imageSize} float32 = ${want} bytes`,
      'bad_encoded_observation'
    );
  return { image: toFloat32(bytes), width: e.width, height: e.height };
}
