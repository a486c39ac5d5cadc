/**
 * VLM checkpoints in MinIO: a Hugging Face safetensors folder (full weights, or a LoRA adapter) stored
 * file by file under `campaigns/<id>/checkpoints/v<N>/hf/<file>`, and a manifest `…/v<N>/hf.json`
 * listing every file with its size and sha256 (storage/keys.ts). The manifest is written last: its
 * presence is what makes the version exist, so a half-uploaded folder is never loaded.
 *
 * Downloads stream each file to disk through sha256 (a 7B folder is ~15 GB: never held in memory) into
 * a private temporary folder that is renamed into place only when every file checked out. A missing
 * manifest or object is `not_found`, a wrong hash, size or manifest is `corrupt` (CheckpointRejectedError,
 * non-retryable: the bytes in the store are already wrong); MinIO being unreachable propagates as
 * StorageUnavailableError (retryable).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { CheckpointRejectedError } from '../checkpoint';
import { CorruptObjectError, ObjectNotFoundError } from '../../storage/errors';
import { keys } from '../../storage/keys';
import type { ObjectStore } from '../../storage/object-store';
import { ObjectRefSchema } from '../../schemas/records';

/** Flat folder, names that are valid key segments as they are (no renaming on the way through MinIO). */
const FileNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9._=-]{1,200}$/, 'a flat file name of letters, digits, ".", "_", "=" or "-"')
  .refine((n) => !/^\.+$/.test(n), 'not a dots-only name');

export const HfCheckpointManifestSchema = z.object({
  schemaVersion: z.literal(1),
  format: z.literal('hf-safetensors-folder'),
  campaignId: z.string().min(1),
  version: z.number().int().nonnegative(),
  parentVersion: z.number().int().nonnegative().nullable(),
  /** full: a whole model folder (weights replace the served ones); lora: a PEFT adapter folder. */
  kind: z.enum(['full', 'lora']),
  files: z
    .array(
      z.object({
        name: FileNameSchema,
        bytes: z.number().int().nonnegative(),
        sha256: z.string().regex(/^[0-9a-f]{64}$/),
      })
    )
    .min(1)
    .refine((f) => new Set(f.map((x) => x.name)).size === f.length, 'file names are unique'),
  createdAt: z.number(),
  // Written by the VLM trainer (python/dartflow_vlm/checkpoints.py); the vLLM role does not read them.
  /** The ledger entry of the train step that made this version (a retried step adopts its own checkpoint). */
  ledgerKey: z.string().min(1).optional(),
  /** The train step's metrics. */
  metrics: z.record(z.string(), z.number().refine(Number.isFinite, 'a finite number')).optional(),
  /** AdamW moments of the trained parameters (storage/keys.ts hfCheckpointOptimizer), outside `hf/`. */
  optimizerState: ObjectRefSchema.optional(),
});
export type HfCheckpointManifest = z.infer<typeof HfCheckpointManifestSchema>;
export type HfCheckpointKind = HfCheckpointManifest['kind'];

class HashingCounter extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    cb(null, chunk);
  }
}

export interface UploadHfCheckpointInput {
  campaignId: string;
  version: number;
  parentVersion: number | null;
  kind: HfCheckpointKind;
  /** The folder to upload: its regular files at the top level (sub-folders are refused). */
  dir: string;
}

/** Uploads a folder as checkpoint `version` (files first, manifest last); returns the manifest. */
export async function uploadHfCheckpoint(
  store: ObjectStore,
  input: UploadHfCheckpointInput
): Promise<HfCheckpointManifest> {
  const entries = fs.readdirSync(input.dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  const files: HfCheckpointManifest['files'] = [];
  for (const e of entries) {
    if (e.isDirectory())
      throw new Error(`${input.dir}/${e.name}: sub-folders are not supported in a checkpoint folder`);
    if (!e.isFile()) continue;
    FileNameSchema.parse(e.name);
    const full = path.join(input.dir, e.name);
    const size = fs.statSync(full).size;
    const ref = await store.putStream(
      keys.hfCheckpointFile(input.campaignId, input.version, e.name),
      fs.createReadStream(full),
      size
    );
    files.push({ name: e.name, bytes: ref.bytes, sha256: ref.sha256 });
  }
  const manifest: HfCheckpointManifest = {
    schemaVersion: 1,
    format: 'hf-safetensors-folder',
    campaignId: input.campaignId,
    version: input.version,
    parentVersion: input.parentVersion,
    kind: input.kind,
    files,
    createdAt: Date.now(),
  };
  await store.putJson(keys.hfCheckpointManifest(input.campaignId, input.version), manifest, HfCheckpointManifestSchema);
  return manifest;
}

/** The manifest of a version, validated; CheckpointRejectedError when it is missing or unusable. */
export async function readHfManifest(
  store: ObjectStore,
  campaignId: string,
  version: number
): Promise<HfCheckpointManifest> {
  const key = keys.hfCheckpointManifest(campaignId, version);
  let m: HfCheckpointManifest;
  try {
    m = await store.getJson(key, HfCheckpointManifestSchema);
  } catch (err) {
    if (err instanceof ObjectNotFoundError)
      throw new CheckpointRejectedError('not_found', campaignId, version, `no manifest at ${key}`);
    if (err instanceof CorruptObjectError)
      throw new CheckpointRejectedError('corrupt', campaignId, version, err.message);
    throw err;
  }
  if (m.campaignId !== campaignId || m.version !== version)
    throw new CheckpointRejectedError('corrupt', campaignId, version, `${key} describes ${m.campaignId} v${m.version}`);
  return m;
}

/** True when a manifest exists for the version (a cheap probe; MinIO outages propagate). */
export function hfCheckpointExists(store: ObjectStore, campaignId: string, version: number): Promise<boolean> {
  return store.exists(keys.hfCheckpointManifest(campaignId, version));
}

export interface DownloadedCheckpoint {
  manifest: HfCheckpointManifest;
  dir: string;
}

/**
 * Downloads and verifies every file of the manifest into `destDir` (replaced if it exists). `onFile` is
 * called after each file (the activity heartbeats there).
 */
export async function downloadHfCheckpoint(
  store: ObjectStore,
  manifest: HfCheckpointManifest,
  destDir: string,
  onFile?: (name: string, bytes: number) => void
): Promise<DownloadedCheckpoint> {
  const { campaignId, version } = manifest;
  const tmp = `${destDir}.partial-${randomBytes(4).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true });
  try {
    for (const f of manifest.files) {
      const key = keys.hfCheckpointFile(campaignId, version, f.name);
      let source;
      try {
        source = await store.getStream(key);
      } catch (err) {
        if (err instanceof ObjectNotFoundError)
          throw new CheckpointRejectedError('not_found', campaignId, version, `${key} is missing`);
        throw err;
      }
      const counter = new HashingCounter();
      await pipeline(source, counter, fs.createWriteStream(path.join(tmp, f.name)));
      const sha = counter.hash.digest('hex');
      if (counter.bytes !== f.bytes || sha !== f.sha256) {
        throw new CheckpointRejectedError(
          'corrupt',
          campaignId,
          version,
          `${key}: read ${counter.bytes} bytes with sha256 ${sha.slice(0, 12)}…, the manifest says ${f.bytes} bytes, ${f.sha256.slice(0, 12)}…`
        );
      }
      onFile?.(f.name, f.bytes);
    }
    fs.rmSync(destDir, { recursive: true, force: true });
    fs.mkdirSync(path.dirname(destDir), { recursive: true });
    fs.renameSync(tmp, destDir);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return { manifest, dir: destDir };
}
