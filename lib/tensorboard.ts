/**
 * TensorBoard scalars without TensorFlow: the tfevents file format written and read directly.
 *
 * A tfevents file is a sequence of TFRecords, each
 *   uint64 length (little-endian) · uint32 masked CRC32C of those 8 bytes · data · uint32 masked CRC32C of data
 * where data is a serialized `tensorflow.Event` protocol buffer (tensorflow/core/util/event.proto):
 *   Event   { double wall_time = 1; int64 step = 2; oneof { string file_version = 3; Summary summary = 5; … } }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; oneof { float simple_value = 2; … } }
 * and the masked CRC is ((crc >>> 15) | (crc << 17)) + 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h).
 * The first record of a file is an Event with file_version "brain.Event:2". TensorBoard reads every file
 * whose name contains "tfevents" in a run directory; scalars written as simple_value show in its Scalars tab.
 *
 * Only what scalars need is encoded (a few dozen lines instead of a protobuf dependency); the reader
 * decodes any Event, skipping fields it does not know, and checks both CRCs of every record.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// ---------------------------------------------------------------------------------------------- CRC32C

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI, ext4 and TFRecord use it. */
export function crc32c(data: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = CRC32C_TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotate right by 15 and add a constant, so CRCs of CRCs do not look like data. */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32c(data);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

// ---------------------------------------------------------------------------------------------- records

/** One TFRecord around `data`. */
export function tfRecord(data: Uint8Array): Buffer {
  const out = Buffer.alloc(8 + 4 + data.length + 4);
  out.writeBigUInt64LE(BigInt(data.length), 0);
  out.writeUInt32LE(maskedCrc32c(out.subarray(0, 8)), 8);
  out.set(data, 12);
  out.writeUInt32LE(maskedCrc32c(data), 12 + data.length);
  return out;
}

export class TfRecordError extends Error {
  constructor(
    readonly offset: number,
    message: string
  ) {
    super(`tfevents record at byte ${offset}: ${message}`);
    this.name = 'TfRecordError';
  }
}

/**
 * The data of every complete record in `buf`, both CRCs checked. A truncated last record (a writer
 * still appending) is left out, as TensorBoard does; a CRC mismatch is an error.
 */
export function readTfRecords(buf: Uint8Array): Uint8Array[] {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: Uint8Array[] = [];
  let at = 0;
  while (at + 12 <= b.length) {
    const len = b.readBigUInt64LE(at);
    if (b.readUInt32LE(at + 8) !== maskedCrc32c(b.subarray(at, at + 8)))
      throw new TfRecordError(at, 'length CRC mismatch');
    if (len > BigInt(b.length - at - 16)) break; // not written completely yet
    const n = Number(len);
    const data = b.subarray(at + 12, at + 12 + n);
    if (b.readUInt32LE(at + 12 + n) !== maskedCrc32c(data)) throw new TfRecordError(at, 'data CRC mismatch');
    out.push(data);
    at += 16 + n;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- protobuf

function varint(v: bigint | number): number[] {
  let x = BigInt.asUintN(64, BigInt(v)); // int64 is encoded as its two's-complement uint64
  const out: number[] = [];
  while (x >= 0x80n) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

const key = (field: number, wireType: number): number[] => varint((field << 3) | wireType);

function lengthDelimited(field: number, bytes: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([...key(field, 2), ...varint(bytes.length)]), bytes]);
}

function encodeScalarValue(tag: string, value: number): Buffer {
  const f = Buffer.alloc(4);
  f.writeFloatLE(value, 0);
  return Buffer.concat([lengthDelimited(1, Buffer.from(tag, 'utf8')), Buffer.from(key(2, 5)), f]);
}

export interface EventFields {
  /** Seconds since the epoch. */
  wallTime: number;
  step?: number;
  fileVersion?: string;
  /** tag → value, written as Summary.Value.simple_value (a 32-bit float). */
  scalars?: Record<string, number>;
}

/** A serialized tensorflow.Event. */
export function encodeEvent(e: EventFields): Buffer {
  const parts: Buffer[] = [];
  const wall = Buffer.alloc(9);
  wall[0] = key(1, 1)[0]!;
  wall.writeDoubleLE(e.wallTime, 1);
  parts.push(wall);
  if (e.step !== undefined && e.step !== 0) parts.push(Buffer.from([...key(2, 0), ...varint(Math.trunc(e.step))]));
  if (e.fileVersion !== undefined) parts.push(lengthDelimited(3, Buffer.from(e.fileVersion, 'utf8')));
  if (e.scalars) {
    const values = Object.entries(e.scalars).map(([tag, v]) => lengthDelimited(1, encodeScalarValue(tag, v)));
    parts.push(lengthDelimited(5, Buffer.concat(values)));
  }
  return Buffer.concat(parts);
}

class Reader {
  at = 0;
  constructor(readonly b: Buffer) {}
  done(): boolean {
    return this.at >= this.b.length;
  }
  varint(): bigint {
    let x = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (this.at >= this.b.length) throw new Error('protobuf: truncated varint');
      const byte = this.b[this.at++]!;
      x |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return x;
      if (shift > 63n) throw new Error('protobuf: varint too long');
    }
  }
  take(n: number): Buffer {
    if (this.at + n > this.b.length) throw new Error('protobuf: truncated field');
    const out = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  /** The next field: number, wire type and its raw payload (varint value or bytes). */
  field(): { no: number; wire: number; int?: bigint; bytes?: Buffer } {
    const k = Number(this.varint());
    const no = k >>> 3;
    const wire = k & 7;
    if (wire === 0) return { no, wire, int: this.varint() };
    if (wire === 1) return { no, wire, bytes: this.take(8) };
    if (wire === 2) return { no, wire, bytes: this.take(Number(this.varint())) };
    if (wire === 5) return { no, wire, bytes: this.take(4) };
    throw new Error(`protobuf: unsupported wire type ${wire} (field ${no})`);
  }
}

export interface DecodedEvent {
  wallTime: number;
  step: number;
  fileVersion?: string;
  /** simple_value scalars of the event's summary, by tag (float32 values widened to numbers). */
  scalars: Record<string, number>;
}

/** Decodes a serialized tensorflow.Event (unknown fields and non-scalar summary values are skipped). */
export function decodeEvent(data: Uint8Array): DecodedEvent {
  const r = new Reader(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  const e: DecodedEvent = { wallTime: 0, step: 0, scalars: {} };
  while (!r.done()) {
    const f = r.field();
    if (f.no === 1 && f.wire === 1) e.wallTime = f.bytes!.readDoubleLE(0);
    else if (f.no === 2 && f.wire === 0) e.step = Number(BigInt.asIntN(64, f.int!));
    else if (f.no === 3 && f.wire === 2) e.fileVersion = f.bytes!.toString('utf8');
    else if (f.no === 5 && f.wire === 2) {
      const summary = new Reader(f.bytes!);
      while (!summary.done()) {
        const v = summary.field();
        if (v.no !== 1 || v.wire !== 2) continue;
        const value = new Reader(v.bytes!);
        let tag: string | undefined;
        let simple: number | undefined;
        while (!value.done()) {
          const x = value.field();
          if (x.no === 1 && x.wire === 2) tag = x.bytes!.toString('utf8');
          else if (x.no === 2 && x.wire === 5) simple = x.bytes!.readFloatLE(0);
        }
        if (tag !== undefined && simple !== undefined) e.scalars[tag] = simple;
      }
    }
  }
  return e;
}

/** Every event of a tfevents file, CRCs checked. */
export function readEventFile(file: string): DecodedEvent[] {
  return readTfRecords(fs.readFileSync(file)).map(decodeEvent);
}

// ---------------------------------------------------------------------------------------------- writer

let fileCounter = 0;

/**
 * Appends scalar events to one new tfevents file in `dir` (created if missing). Each event is one
 * write() of a whole record, so a reader polling the file never sees a torn record in the middle, and a
 * crash loses at most the event being written. Synchronous: train steps are seconds to minutes apart.
 */
export class TensorBoardWriter {
  readonly file: string;
  private fd: number | undefined;
  private readonly now: () => number;

  constructor(
    readonly dir: string,
    opts: { now?: () => number } = {}
  ) {
    this.now = opts.now ?? Date.now;
    fs.mkdirSync(dir, { recursive: true });
    const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '_') || 'host';
    this.file = path.join(
      dir,
      `events.out.tfevents.${Math.floor(this.now() / 1000)}.${host}.${process.pid}.${fileCounter++}`
    );
    this.fd = fs.openSync(this.file, 'a');
    this.append({ wallTime: this.now() / 1000, fileVersion: 'brain.Event:2' });
  }

  /** Scalars of one step, in one event (TensorBoard plots each tag as its own series). Non-finite values are left out. */
  scalars(step: number, values: Record<string, number>, wallTimeMs = this.now()): void {
    const finite = Object.fromEntries(Object.entries(values).filter(([, v]) => Number.isFinite(v)));
    if (Object.keys(finite).length === 0) return;
    this.append({ wallTime: wallTimeMs / 1000, step, scalars: finite });
  }

  private append(e: EventFields): void {
    if (this.fd === undefined) throw new Error(`TensorBoard writer for ${this.file} is closed`);
    fs.writeSync(this.fd, tfRecord(encodeEvent(e)));
  }

  close(): void {
    if (this.fd === undefined) return;
    fs.closeSync(this.fd);
    this.fd = undefined;
  }
}
