/**
 * Shared parts of the VLM infrastructure tests: the venv check (tests skip without it), running the
 * Python package's entry points, a synthetic screenshot and the chat request dartflow sends to vLLM.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import { VLM_VENV, vlmPython } from '../../infra/vllm';
import { PROJECT_ROOT } from '../../infra/settings';

export const PYTHON = vlmPython();
export const SKIP_REASON = PYTHON
  ? false
  : `no VLM environment at ${VLM_VENV}: run \`bash infra/install-vlm.sh\` to run these tests`;

/** Runs `python -m <module> ...args` in the VLM venv; resolves with stdout, rejects with stderr's tail. */
export function runPython(args: string[], stdin?: string, timeoutMs = 300_000): Promise<string> {
  if (!PYTHON) throw new Error('no VLM venv');
  const python = PYTHON;
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, { cwd: PROJECT_ROOT, stdio: ['pipe', 'pipe', 'pipe'], timeout: timeoutMs });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${args.join(' ')} exited ${code ?? signal}:\n${(out + err).slice(-3000)}`));
    });
    child.stdin.end(stdin ?? '');
  });
}

export interface BuildSummary {
  out: string;
  seed: number;
  parameters: number;
  vocab_size: number;
  special_token_ids: number[];
}

export async function buildTinyModel(out: string, seed: number): Promise<BuildSummary> {
  const stdout = await runPython(['-m', 'dartflow_vlm.build_tiny_model', '--out', out, '--seed', String(seed)]);
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as BuildSummary;
}

export interface ScoreResult {
  prompt_token_ids: number[];
  logprobs: number[];
}

/** Teacher-forced log-probs of completions under a model folder (python/dartflow_vlm/score.py). */
export async function scoreInTransformers(
  modelDir: string,
  requests: { messages: unknown[]; completion_token_ids: number[] }[]
): Promise<ScoreResult[]> {
  const stdout = await runPython(['-m', 'dartflow_vlm.score'], JSON.stringify({ model_dir: modelDir, requests }));
  return (JSON.parse(stdout) as { results: ScoreResult[] }).results;
}

/** A 320×200 "screenshot": white page, a red box and a blue bar, as PNG bytes. */
export function screenshotPng(): Buffer {
  const png = new PNG({ width: 320, height: 200 });
  for (let y = 0; y < png.height; y++) {
    for (let x = 0; x < png.width; x++) {
      const i = (y * png.width + x) * 4;
      const red = x >= 40 && x < 120 && y >= 40 && y < 100;
      const blue = y >= 160 && y < 180;
      png.data[i] = red ? 220 : blue ? 30 : 255;
      png.data[i + 1] = red ? 20 : blue ? 60 : 255;
      png.data[i + 2] = red ? 20 : blue ? 200 : 255;
      png.data[i + 3] = 255;
    }
  }
  return PNG.sync.write(png);
}

/** The ids of every special token of a model folder (from its tokenizer.json). */
export function specialTokenIds(modelDir: string): number[] {
  const tok = JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')) as {
    added_tokens: { id: number; special: boolean }[];
  };
  return tok.added_tokens.filter((t) => t.special).map((t) => t.id);
}
