/**
 * The storage layer over the `minio` client: JSON and binary objects, content-addressed screenshots,
 * safetensors, listing and streaming. Every write records the object's sha256 (in its metadata and in
 * the returned ObjectRef); every read checks length and hash, so a truncated or altered object is
 * reported with its key and never half-read.
 */
import { createHash } from 'node:crypto';
import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as Minio from 'minio';
import type { z } from 'zod';
import type { ObjectRef } from '../schemas/records';
import type { InfraSettings } from '../infra/settings';
import { CorruptObjectError, ObjectNotFoundError, StorageUnavailableError } from './errors';
import {
  checkTensorSpec,
  decodeSafetensors,
  encodeSafetensors,
  type DecodedSafetensors,
  type ExpectedTensor,
  type TensorMap,
} from './safetensors';
import { keys } from './keys';

const SHA_META = 'x-amz-meta-sha256';
export const sha256Hex = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

/** Screenshot keys remembered as present per store (then forgotten all at once: a bounded set). */
const KNOWN_SCREENSHOTS_MAX = 50_000;

/** Parts of at least 16 MiB keep multipart uploads of checkpoints to a few round trips. */
const PART_SIZE = 16 * 1024 * 1024;

function isNotFound(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchBucket';
}
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    code === 'ECONNRESET' ||
    code === 'ETIMEDOUT' ||
    code === 'EHOSTUNREACH'
  );
}

class HashingCounter extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    cb(null, chunk);
  }
}

/** What a conditional write did: wrote the object, or found the key already taken (and wrote nothing). */
export type ConditionalPutResult = { written: true; ref: ObjectRef } | { written: false };

/** How often a conditional write that met another in-flight one (S3's 409) is tried before giving up. */
const CONDITIONAL_CONFLICT_TRIES = 5;

/** The bytes putJsonLines stores (each row validated first): to know an object's sha256 before writing it. */
export function serializeJsonLines<T>(rows: T[], schema?: z.ZodType<T>): Buffer {
  return Buffer.from(rows.map((r) => JSON.stringify(schema ? schema.parse(r) : r)).join('\n'));
}

export class ObjectStore {
  private readonly knownScreenshots = new Set<string>();

  constructor(
    readonly client: Minio.Client,
    readonly bucket: string,
    readonly endpoint: string
  ) {}

  static fromSettings(settings: InfraSettings, bucket = settings.s3.bucket): ObjectStore {
    const url = new URL(settings.s3.endpoint);
    const client = new Minio.Client({
      endPoint: url.hostname,
      port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80,
      useSSL: url.protocol === 'https:',
      accessKey: settings.s3.accessKey,
      secretKey: settings.s3.secretKey,
      region: settings.s3.region,
      partSize: PART_SIZE,
    });
    return new ObjectStore(client, bucket, settings.s3.endpoint);
  }

  /** Same server and credentials, another bucket (tests use throwaway buckets). */
  withBucket(bucket: string): ObjectStore {
    return new ObjectStore(this.client, bucket, this.endpoint);
  }

  private async call<T>(key: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (isNotFound(err)) throw new ObjectNotFoundError(key, this.bucket);
      if (isConnectionError(err)) throw new StorageUnavailableError(this.endpoint, err);
      throw err;
    }
  }

  /** Creates the bucket if it does not exist (idempotent; safe when several workers race). */
  async ensureBucket(): Promise<void> {
    await this.call('', async () => {
      if (await this.client.bucketExists(this.bucket)) return;
      try {
        await this.client.makeBucket(this.bucket);
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code !== 'BucketAlreadyOwnedByYou' && code !== 'BucketAlreadyExists') throw err;
      }
    });
  }

  async exists(key: string): Promise<boolean> {
    try {
      await this.call(key, () => this.client.statObject(this.bucket, key));
      return true;
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return false;
      throw err;
    }
  }

  async putBytes(key: string, data: Uint8Array, contentType = 'application/octet-stream'): Promise<ObjectRef> {
    const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const sha256 = sha256Hex(buf);
    await this.call(key, () =>
      this.client.putObject(this.bucket, key, buf, buf.length, { 'Content-Type': contentType, [SHA_META]: sha256 })
    );
    return { bucket: this.bucket, key, sha256, bytes: buf.length };
  }

  /**
   * Writes the object only if no object has this key yet (S3 conditional PUT, `If-None-Match: *`): of
   * two concurrent writers exactly one gets `written: true`; the other gets `written: false` and the
   * object stays the first writer's. Commit records use it so that two live attempts of one step cannot
   * both commit. A refused writer should read the object to learn what won: if its own PUT reached the
   * server but the answer was lost, what won may be its own bytes. Meant for small records (one PUT,
   * below the client's multipart part size).
   */
  async putBytesIfAbsent(
    key: string,
    data: Uint8Array,
    contentType = 'application/octet-stream'
  ): Promise<ConditionalPutResult> {
    return this.conditionalPut(key, data, { 'If-None-Match': '*' }, contentType);
  }

  /**
   * Writes the object only if it is still the version whose ETag the caller read (S3 conditional PUT,
   * `If-Match`): a record another writer replaced in between is never overwritten. `written: false` means
   * the object changed (or was deleted); read it again and decide anew.
   */
  async putBytesIfMatch(
    key: string,
    data: Uint8Array,
    etag: string,
    contentType = 'application/octet-stream'
  ): Promise<ConditionalPutResult> {
    try {
      return await this.conditionalPut(key, data, { 'If-Match': `"${etag}"` }, contentType);
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return { written: false }; // deleted since the caller read it
      throw err;
    }
  }

  /** One conditional PUT: `written: false` when the server refused its precondition. */
  private async conditionalPut(
    key: string,
    data: Uint8Array,
    condition: Record<string, string>,
    contentType: string
  ): Promise<ConditionalPutResult> {
    const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const sha256 = sha256Hex(buf);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.call(key, () =>
          this.client.putObject(this.bucket, key, buf, buf.length, {
            'Content-Type': contentType,
            [SHA_META]: sha256,
            ...condition,
          })
        );
        return { written: true, ref: { bucket: this.bucket, key, sha256, bytes: buf.length } };
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'PreconditionFailed') return { written: false };
        // S3 answers 409 while another conditional write of the key is in flight: ask again once it settled.
        if (code === 'ConditionalRequestConflict' && attempt < CONDITIONAL_CONFLICT_TRIES) {
          await new Promise((r) => setTimeout(r, 50 * attempt));
          continue;
        }
        throw err;
      }
    }
  }

  /** putJson with putBytesIfMatch's only-if-unchanged rule (the value is validated before writing). */
  async putJsonIfMatch<T>(key: string, value: T, etag: string, schema?: z.ZodType<T>): Promise<ConditionalPutResult> {
    const checked = schema ? schema.parse(value) : value;
    return this.putBytesIfMatch(key, Buffer.from(JSON.stringify(checked)), etag, 'application/json');
  }

  /** The object's current ETag (the token putBytesIfMatch takes), or null when there is no such object. */
  async etagOf(key: string): Promise<string | null> {
    try {
      return (await this.call(key, () => this.client.statObject(this.bucket, key))).etag;
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return null;
      throw err;
    }
  }

  /** putJson with putBytesIfAbsent's only-if-absent rule (the value is validated before writing). */
  async putJsonIfAbsent<T>(key: string, value: T, schema?: z.ZodType<T>): Promise<ConditionalPutResult> {
    const checked = schema ? schema.parse(value) : value;
    return this.putBytesIfAbsent(key, Buffer.from(JSON.stringify(checked)), 'application/json');
  }

  /** Reads a whole object, checking its length and sha256 (the recorded one, or `expectedSha256`). */
  async getBytes(key: string, expectedSha256?: string): Promise<Buffer> {
    // One GET: its response headers carry the length and the recorded sha256. A HEAD before it doubled the
    // requests of every read (trainer samples, index compaction) and could describe another write than the body.
    const stream = await this.call(key, () => this.client.getObject(this.bucket, key));
    const stat = await this.lengthAndSha256(key, stream).catch((err: unknown) => {
      (stream as { destroy?: () => void }).destroy?.();
      throw err;
    });
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of stream) chunks.push(chunk as Buffer);
    } catch (err) {
      throw new CorruptObjectError(
        key,
        `read interrupted after ${chunks.reduce((n, c) => n + c.length, 0)} bytes (${String(err)})`
      );
    }
    const buf = Buffer.concat(chunks);
    if (buf.length !== stat.size)
      throw new CorruptObjectError(key, `truncated: read ${buf.length} of ${stat.size} bytes`);
    const want = expectedSha256 ?? stat.sha256;
    if (want) {
      const got = sha256Hex(buf);
      if (got !== want)
        throw new CorruptObjectError(
          key,
          `sha256 ${got.slice(0, 12)}… does not match the recorded ${want.slice(0, 12)}…`
        );
    }
    return buf;
  }

  /** A GET response's length and recorded sha256; a HEAD only when the response lacks them. */
  private async lengthAndSha256(key: string, response: unknown): Promise<{ size: number; sha256?: string }> {
    const headers = (response as { headers?: Record<string, string | string[] | undefined> }).headers;
    const length = headers?.['content-length'];
    if (typeof length === 'string' && /^\d+$/.test(length)) {
      const sha = headers?.[SHA_META];
      return { size: Number(length), ...(typeof sha === 'string' ? { sha256: sha } : {}) };
    }
    const stat = await this.call(key, () => this.client.statObject(this.bucket, key));
    const sha = (stat.metaData as Record<string, string> | undefined)?.sha256;
    return { size: stat.size, ...(sha ? { sha256: sha } : {}) };
  }

  async putJson<T>(key: string, value: T, schema?: z.ZodType<T>): Promise<ObjectRef> {
    // Validate before writing too: a bad record must never reach the store.
    const checked = schema ? schema.parse(value) : value;
    return this.putBytes(key, Buffer.from(JSON.stringify(checked)), 'application/json');
  }

  async getJson<T>(key: string, schema: z.ZodType<T>, expectedSha256?: string): Promise<T> {
    const buf = await this.getBytes(key, expectedSha256);
    let raw: unknown;
    try {
      raw = JSON.parse(buf.toString('utf8'));
    } catch (err) {
      throw new CorruptObjectError(key, `not valid JSON (${(err as Error).message})`);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      throw new CorruptObjectError(
        key,
        `does not match its schema at "${first?.path.join('.') ?? ''}": ${first?.message ?? ''}`
      );
    }
    return parsed.data;
  }

  /** JSON Lines: one record per line (trajectory steps). */
  async putJsonLines<T>(key: string, rows: T[], schema?: z.ZodType<T>): Promise<ObjectRef> {
    return this.putBytes(key, serializeJsonLines(rows, schema), 'application/x-ndjson');
  }

  async getJsonLines<T>(key: string, schema: z.ZodType<T>, expectedSha256?: string): Promise<T[]> {
    const text = (await this.getBytes(key, expectedSha256)).toString('utf8');
    if (text.length === 0) return [];
    return text.split('\n').map((line, i) => {
      let raw: unknown;
      try {
        raw = JSON.parse(line);
      } catch (err) {
        throw new CorruptObjectError(key, `line ${i + 1} is not valid JSON (${(err as Error).message})`);
      }
      const parsed = schema.safeParse(raw);
      if (!parsed.success) {
        const first = parsed.error.issues[0];
        throw new CorruptObjectError(
          key,
          `line ${i + 1} does not match its schema at "${first?.path.join('.') ?? ''}": ${first?.message ?? ''}`
        );
      }
      return parsed.data;
    });
  }

  /** Content-addressed PNG: key = sha256 of the bytes; written once, later writes are no-ops. */
  async putScreenshot(png: Uint8Array): Promise<ObjectRef> {
    const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
    if (png.byteLength < 8 || PNG_MAGIC.some((b, i) => png[i] !== b))
      throw new Error('putScreenshot: data is not a PNG');
    const sha256 = sha256Hex(png);
    const key = keys.screenshot(sha256);
    // Screenshots this store already wrote or saw need no round trip (episodes repeat frames a lot).
    if (!this.knownScreenshots.has(key)) {
      if (!(await this.exists(key))) await this.putBytes(key, png, 'image/png');
      if (this.knownScreenshots.size >= KNOWN_SCREENSHOTS_MAX) this.knownScreenshots.clear();
      this.knownScreenshots.add(key);
    }
    return { bucket: this.bucket, key, sha256, bytes: png.byteLength };
  }

  async putSafetensors(key: string, tensors: TensorMap, metadata: Record<string, string> = {}): Promise<ObjectRef> {
    return this.putBytes(key, encodeSafetensors(tensors, metadata));
  }

  /** Reads and validates safetensors; with `expected`, dtype and shape of every tensor are checked too. */
  async getSafetensors(
    key: string,
    opts: { expected?: Record<string, ExpectedTensor>; sha256?: string } = {}
  ): Promise<DecodedSafetensors> {
    const buf = await this.getBytes(key, opts.sha256);
    try {
      const decoded = decodeSafetensors(buf, key);
      if (opts.expected) checkTensorSpec(decoded.tensors, opts.expected, key);
      return decoded;
    } catch (err) {
      throw new CorruptObjectError(key, (err as Error).message.replace(`${key}: `, ''));
    }
  }

  /**
   * Streams a (possibly huge) object in; the client uses multipart upload above one part. Returns
   * the ref with the sha256 computed on the way; verify a later read with `verify(ref)`.
   */
  async putStream(
    key: string,
    source: Readable,
    size?: number,
    contentType = 'application/octet-stream'
  ): Promise<ObjectRef> {
    const counter = new HashingCounter();
    const body = new PassThrough();
    const upload = this.call(key, () =>
      this.client.putObject(this.bucket, key, body, size, { 'Content-Type': contentType })
    );
    await Promise.all([pipeline(source, counter, body), upload]);
    return { bucket: this.bucket, key, sha256: counter.hash.digest('hex'), bytes: counter.bytes };
  }

  async getStream(key: string): Promise<Readable> {
    return this.call(key, () => this.client.getObject(this.bucket, key));
  }

  /** Streams the object through sha256 and checks it against the ref (length and hash). */
  async verify(ref: ObjectRef): Promise<void> {
    const stream = await this.getStream(ref.key);
    const counter = new HashingCounter();
    await pipeline(stream, counter, async function* (src: AsyncIterable<Buffer>) {
      for await (const _ of src) {
        /* drain */
      }
    });
    if (counter.bytes !== ref.bytes)
      throw new CorruptObjectError(ref.key, `truncated: ${counter.bytes} of ${ref.bytes} bytes`);
    const got = counter.hash.digest('hex');
    if (got !== ref.sha256)
      throw new CorruptObjectError(
        ref.key,
        `sha256 ${got.slice(0, 12)}… does not match the ref's ${ref.sha256.slice(0, 12)}…`
      );
  }

  /**
   * Every key under `prefix`, sorted. `startAfter` (a key) skips the keys up to and including it on the
   * server, so a reader of the newest entries of a long, ordered prefix does not page through all of it.
   */
  async list(prefix: string, startAfter?: string): Promise<string[]> {
    return this.call(prefix, async () => {
      const out: string[] = [];
      const stream = this.client.listObjectsV2(this.bucket, prefix, true, startAfter ?? '');
      for await (const item of stream as AsyncIterable<{ name?: string }>) if (item.name) out.push(item.name);
      return out.sort();
    });
  }

  async remove(key: string): Promise<void> {
    await this.call(key, () => this.client.removeObject(this.bucket, key));
  }

  /**
   * Removes these objects with one multi-object DELETE per 1,000 keys (S3's limit) instead of one request
   * each; keys that do not exist count as removed. A key the server refuses to remove is an error.
   */
  async removeMany(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const chunk = keys.slice(i, i + 1000);
      const results = await this.call(chunk[0] ?? '', () => this.client.removeObjects(this.bucket, chunk));
      const refused = results.find((r) => r?.Error);
      if (refused?.Error)
        throw new Error(
          `could not remove ${refused.Error.Key ?? '?'} from bucket ${this.bucket}: ${refused.Error.Code ?? ''} ${refused.Error.Message ?? ''}`.trim()
        );
    }
  }

  /** Removes every object under a prefix (test cleanup, campaign deletion). */
  async removePrefix(prefix: string): Promise<number> {
    const all = await this.list(prefix);
    await this.removeMany(all);
    return all.length;
  }
}
