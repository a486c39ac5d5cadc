/**
 * Runs the VLM venv's Python package (python/dartflow_vlm) from TypeScript: one entry point to completion,
 * and the tiny Qwen2-VL builder the tests and the VLM benchmarks share.
 */
import { spawn } from 'node:child_process';
import { vlmPython } from './vllm';
import { PROJECT_ROOT } from './settings';

/** Runs `python <args>` in the VLM venv; resolves with stdout, rejects with the output's tail. */
export function runVlmPython(args: string[], stdin?: string, timeoutMs = 300_000): Promise<string> {
  const python = vlmPython();
  if (!python) return Promise.reject(new Error('no VLM venv: run `bash infra/install-vlm.sh`'));
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

/** The summary line of `python -m dartflow_vlm.build_tiny_model`. */
export interface BuildSummary {
  out: string;
  seed: number;
  size: string;
  parameters: number;
  vocab_size: number;
  special_token_ids: number[];
}

/** Builds a random-init Qwen2-VL folder offline (python/dartflow_vlm/build_tiny_model.py SIZES). */
export async function buildTinyModel(out: string, seed: number, size = 'tiny'): Promise<BuildSummary> {
  const stdout = await runVlmPython([
    '-m',
    'dartflow_vlm.build_tiny_model',
    '--out',
    out,
    '--seed',
    String(seed),
    '--size',
    size,
  ]);
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as BuildSummary;
}
