/**
 * Shared parts of the VLM infrastructure tests: the venv check (tests skip without it), running the
 * Python package's entry points, a synthetic screenshot and the chat request dartflow sends to vLLM.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import { VLM_VENV, vlmPython } from '../../infra/vllm';
import { buildTinyModel, runVlmPython, type BuildSummary } from '../../infra/vlm-python';

export const PYTHON = vlmPython();
export const SKIP_REASON = PYTHON
  ? false
  : `no VLM environment at ${VLM_VENV}: run \`bash infra/install-vlm.sh\` to run these tests`;

/** Runs `python <args>` in the VLM venv (infra/vlm-python.ts). */
export const runPython = runVlmPython;
export { buildTinyModel, type BuildSummary };

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
