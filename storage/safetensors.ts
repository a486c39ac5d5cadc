/**
 * safetensors encode/decode (https://huggingface.co/docs/safetensors): 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets}, __metadata__?}, then the raw data.
 * Pure (no I/O). Decoding validates everything and never returns half-read tensors.
 */
import { createHash } from 'node:crypto';

export type SafetensorsDtype =
  'F32' | 'F64' | 'I32' | 'I64' | 'U8' | 'I8' | 'F16' | 'BF16' | 'I16' | 'U16' | 'U32' | 'U64' | 'BOOL';

const DTYPE_BYTES: Record<SafetensorsDtype, number> = {
  F64: 8,
  I64: 8,
  U64: 8,
  F32: 4,
  I32: 4,
  U32: 4,
  F16: 2,
  BF16: 2,
  I16: 2,
  U16: 2,
  U8: 1,
  I8: 1,
  BOOL: 1,
};

export interface Tensor {
  dtype: SafetensorsDtype;
  shape: number[];
  /** Little-endian raw bytes of the tensor (a copy, aligned for typed-array views). */
  data: Uint8Array;
}

export type TensorMap = Record<string, Tensor>;

/** Raised for any structural problem; `where` names the object key or file when known. */
export class SafetensorsError extends Error {
  constructor(
    message: string,
    readonly where?: string
  ) {
    super(where ? `${where}: ${message}` : message);
    this.name = 'SafetensorsError';
  }
}

export function f32Tensor(shape: number[], values: Float32Array): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (values.length !== n)
    throw new SafetensorsError(`shape [${shape.join(',')}] needs ${n} values, got ${values.length}`);
  return {
    dtype: 'F32',
    shape,
    data: new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength)),
  };
}

/** A Float32Array view of an F32 tensor. */
export function asFloat32(t: Tensor, name = 'tensor'): Float32Array {
  if (t.dtype !== 'F32') throw new SafetensorsError(`${name} has dtype ${t.dtype}, expected F32`);
  const copy = new Uint8Array(t.data); // aligned copy
  return new Float32Array(copy.buffer, 0, copy.byteLength / 4);
}

export function encodeSafetensors(tensors: TensorMap, metadata: Record<string, string> = {}): Buffer {
  const names = Object.keys(tensors).sort();
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let offset = 0;
  for (const name of names) {
    const t = tensors[name]!;
    const expected = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    if (t.data.byteLength !== expected) {
      throw new SafetensorsError(
        `tensor ${name}: ${t.data.byteLength} bytes for ${t.dtype}[${t.shape.join(',')}], expected ${expected}`
      );
    }
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + expected] };
    offset += expected;
  }
  let json = JSON.stringify(header);
  // Pad the header with spaces so the data section starts 8-byte aligned (allowed by the format).
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const headerBytes = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let pos = 8 + headerBytes.length;
  for (const name of names) {
    const t = tensors[name]!;
    Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).copy(out, pos);
    pos += t.data.byteLength;
  }
  return out;
}

export interface DecodedSafetensors {
  tensors: TensorMap;
  metadata: Record<string, string>;
  sha256: string;
}

const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export function decodeSafetensors(buf: Uint8Array, where?: string): DecodedSafetensors {
  if (buf.byteLength < 8) throw new SafetensorsError(`truncated: ${buf.byteLength} bytes, no header length`, where);
  const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const headerLen = Number(view.readBigUInt64LE(0));
  if (headerLen <= 1 || headerLen > MAX_HEADER_BYTES || 8 + headerLen > buf.byteLength) {
    throw new SafetensorsError(
      `corrupt or truncated: header length ${headerLen} does not fit in ${buf.byteLength} bytes`,
      where
    );
  }
  let header: unknown;
  try {
    header = JSON.parse(view.subarray(8, 8 + headerLen).toString('utf8'));
  } catch (err) {
    throw new SafetensorsError(`corrupt header JSON (${(err as Error).message})`, where);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new SafetensorsError('corrupt header: not a JSON object', where);
  }
  const dataStart = 8 + headerLen;
  const dataLen = buf.byteLength - dataStart;
  const tensors: TensorMap = {};
  let metadata: Record<string, string> = {};
  const spans: Array<[number, number, string]> = [];
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      metadata = entry as Record<string, string>;
      continue;
    }
    const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof e.dtype !== 'string' || !(e.dtype in DTYPE_BYTES)) {
      throw new SafetensorsError(`tensor ${name}: unknown dtype ${JSON.stringify(e.dtype)}`, where);
    }
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isInteger(d) && d >= 0)) {
      throw new SafetensorsError(`tensor ${name}: invalid shape ${JSON.stringify(e.shape)}`, where);
    }
    const offs = e.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isInteger(o) && o >= 0)) {
      throw new SafetensorsError(`tensor ${name}: invalid data_offsets ${JSON.stringify(offs)}`, where);
    }
    const [start, end] = offs as [number, number];
    const dtype = e.dtype as SafetensorsDtype;
    const shape = e.shape as number[];
    const expected = shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    if (end < start || end - start !== expected) {
      throw new SafetensorsError(
        `tensor ${name}: ${end - start} bytes for ${dtype}[${shape.join(',')}], expected ${expected}`,
        where
      );
    }
    if (end > dataLen) {
      throw new SafetensorsError(
        `truncated: tensor ${name} ends at byte ${end} but the data section has ${dataLen}`,
        where
      );
    }
    spans.push([start, end, name]);
    tensors[name] = { dtype, shape, data: new Uint8Array(view.subarray(dataStart + start, dataStart + end)) };
  }
  // The data section must be covered exactly once, with no holes or overlaps (the format's own rule).
  spans.sort((a, b) => a[0] - b[0]);
  let cursor = 0;
  for (const [start, end, name] of spans) {
    if (start !== cursor)
      throw new SafetensorsError(`tensor ${name}: data_offsets leave a gap or overlap at byte ${cursor}`, where);
    cursor = end;
  }
  if (cursor !== dataLen) throw new SafetensorsError(`${dataLen - cursor} trailing bytes after the last tensor`, where);
  return { tensors, metadata, sha256: createHash('sha256').update(buf).digest('hex') };
}

export interface ExpectedTensor {
  dtype: SafetensorsDtype;
  shape: number[];
}

/** Checks that every expected tensor is present with the right dtype and shape (and no extras). */
export function checkTensorSpec(tensors: TensorMap, expected: Record<string, ExpectedTensor>, where?: string): void {
  for (const [name, exp] of Object.entries(expected)) {
    const t = tensors[name];
    if (!t) throw new SafetensorsError(`mismatch: tensor ${name} is missing`, where);
    if (t.dtype !== exp.dtype)
      throw new SafetensorsError(`mismatch: tensor ${name} has dtype ${t.dtype}, expected ${exp.dtype}`, where);
    if (t.shape.length !== exp.shape.length || t.shape.some((d, i) => d !== exp.shape[i])) {
      throw new SafetensorsError(
        `mismatch: tensor ${name} has shape [${t.shape.join(',')}], expected [${exp.shape.join(',')}]`,
        where
      );
    }
  }
  for (const name of Object.keys(tensors)) {
    if (!(name in expected)) throw new SafetensorsError(`mismatch: unexpected tensor ${name}`, where);
  }
}
