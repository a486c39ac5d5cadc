/**
 * Checks a downloaded checkpoint folder against what the vLLM server runs, before vLLM is touched.
 *
 * Why: vLLM's reload_weights copies tensors into the live model one by one; a folder with a missing or
 * misshapen tensor can fail half-way and leave a mix of old and new weights. So a full-weight checkpoint
 * must carry exactly the served model's tensor names and shapes (read from the safetensors headers, a
 * few KB each), every file must be as long as its header says (a truncated file is refused even when
 * its manifest hash matches), and its config.json, if it has one, must describe the same architecture
 * (reload_weights never re-reads the config: another architecture needs a new server).
 */
import fs from 'node:fs';
import path from 'node:path';

export interface TensorInfo {
  dtype: string;
  shape: number[];
}

/** A folder cannot be loaded into this server; the message names the file and the tensor. */
export class IncompatibleCheckpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IncompatibleCheckpointError';
  }
}

const MAX_HEADER = 100 * 1024 * 1024;

/** Tensor name → dtype and shape of one safetensors file; checks the file is as long as the header says. */
export function readSafetensorsHeader(file: string): Map<string, TensorInfo> {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (size < 8 || fs.readSync(fd, lenBuf, 0, 8, 0) !== 8)
      throw new IncompatibleCheckpointError(`${file}: not a safetensors file (shorter than 8 bytes)`);
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n <= 0 || n > MAX_HEADER || 8 + n > size)
      throw new IncompatibleCheckpointError(`${file}: bad safetensors header length ${n} (file has ${size} bytes)`);
    const header = Buffer.alloc(n);
    fs.readSync(fd, header, 0, n, 8);
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(header.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new IncompatibleCheckpointError(`${file}: safetensors header is not JSON`);
    }
    const out = new Map<string, TensorInfo>();
    let end = 0;
    for (const [name, v] of Object.entries(json)) {
      if (name === '__metadata__') continue;
      const t = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const offsets = t.data_offsets;
      if (
        typeof t.dtype !== 'string' ||
        !Array.isArray(t.shape) ||
        !t.shape.every((d) => Number.isInteger(d) && (d as number) >= 0) ||
        !Array.isArray(offsets) ||
        offsets.length !== 2 ||
        !offsets.every((o) => Number.isInteger(o))
      )
        throw new IncompatibleCheckpointError(`${file}: tensor ${name} has a malformed header entry`);
      end = Math.max(end, offsets[1] as number);
      out.set(name, { dtype: t.dtype, shape: t.shape as number[] });
    }
    if (8 + n + end !== size)
      throw new IncompatibleCheckpointError(`${file}: ${size} bytes, but its header describes ${8 + n + end}`);
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/** Every tensor of every *.safetensors file in a folder (a tensor in two files is refused). */
export function folderTensors(dir: string): Map<string, TensorInfo> {
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort();
  if (files.length === 0) throw new IncompatibleCheckpointError(`${dir}: no .safetensors file`);
  const all = new Map<string, TensorInfo>();
  for (const f of files) {
    for (const [name, info] of readSafetensorsHeader(path.join(dir, f))) {
      if (all.has(name)) throw new IncompatibleCheckpointError(`${dir}: tensor ${name} appears in two files`);
      all.set(name, info);
    }
  }
  return all;
}

// Fields that change with the saving library or run, not with the architecture.
const VOLATILE_CONFIG_KEYS = new Set(['_name_or_path', 'transformers_version', 'torch_dtype', 'dtype', 'use_cache']);

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k]) => !VOLATILE_CONFIG_KEYS.has(k))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, canonical(x)])
    );
  return v;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new IncompatibleCheckpointError(`${file}: not readable JSON (${(err as Error).message})`);
  }
}

const FLOAT_DTYPES = new Set(['F64', 'F32', 'F16', 'BF16', 'F8_E4M3', 'F8_E5M2']);

/** Throws IncompatibleCheckpointError unless `candidateDir` can replace the weights of `servedDir` in place. */
export function checkFullWeightsCompatible(servedDir: string, candidateDir: string): void {
  const served = folderTensors(servedDir);
  const cand = folderTensors(candidateDir);
  const missing = [...served.keys()].filter((k) => !cand.has(k));
  const extra = [...cand.keys()].filter((k) => !served.has(k));
  if (missing.length > 0 || extra.length > 0) {
    throw new IncompatibleCheckpointError(
      `tensor names differ from the served model: ${missing.length} missing (${missing.slice(0, 3).join(', ')}), ` +
        `${extra.length} unknown (${extra.slice(0, 3).join(', ')})`
    );
  }
  for (const [name, s] of served) {
    const c = cand.get(name)!;
    // reload_weights copies into the live parameters, casting silently: integer bytes would load as garbage.
    if (FLOAT_DTYPES.has(s.dtype) && !FLOAT_DTYPES.has(c.dtype))
      throw new IncompatibleCheckpointError(`tensor ${name}: dtype ${c.dtype} where the served model has ${s.dtype}`);
    if (c.shape.join('x') !== s.shape.join('x'))
      throw new IncompatibleCheckpointError(
        `tensor ${name}: shape [${c.shape.join(', ')}] ≠ served [${s.shape.join(', ')}]`
      );
  }
  const candConfig = path.join(candidateDir, 'config.json');
  const servedConfig = path.join(servedDir, 'config.json');
  if (fs.existsSync(candConfig) && fs.existsSync(servedConfig)) {
    if (JSON.stringify(canonical(readJson(candConfig))) !== JSON.stringify(canonical(readJson(servedConfig))))
      throw new IncompatibleCheckpointError(
        'config.json describes another architecture than the served model (a reload keeps the architecture; start a new server for it)'
      );
  }
}

/** Throws IncompatibleCheckpointError unless `dir` is a LoRA adapter within the server's max rank. */
export function checkLoraAdapter(dir: string, maxRank: number): void {
  const cfgFile = path.join(dir, 'adapter_config.json');
  if (!fs.existsSync(cfgFile))
    throw new IncompatibleCheckpointError(`${dir}: no adapter_config.json (not a LoRA adapter)`);
  const cfg = readJson(cfgFile) as { r?: unknown };
  if (typeof cfg.r !== 'number' || cfg.r < 1 || cfg.r > maxRank)
    throw new IncompatibleCheckpointError(
      `adapter rank ${String(cfg.r)} is outside 1..${maxRank} (the server's --max-lora-rank)`
    );
  folderTensors(dir);
}
