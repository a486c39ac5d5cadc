/**
 * Object key layout in the bucket (one place, so every role agrees). Ids that come from users or task
 * files are sanitized: no path traversal, no separators, bounded length.
 */

const SAFE = /[^A-Za-z0-9._=-]/g;

/** Turns an arbitrary id into one safe key segment ("../etc" → "_.._etc" is avoided: dots-only is rejected). */
export function safeSegment(id: string, what = 'id'): string {
  if (typeof id !== 'string' || id.length === 0) throw new Error(`${what} must be a non-empty string`);
  const cleaned = id.replace(SAFE, '_').slice(0, 200);
  if (/^\.+$/.test(cleaned)) throw new Error(`${what} "${id}" is not a valid key segment`);
  return cleaned;
}

const pad = (n: number, width = 6) => String(n).padStart(width, '0');

export const keys = {
  screenshot: (sha256: string) => `screenshots/${sha256}.png`,
  trajectoryManifest: (campaignId: string, trajectoryId: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/trajectories/${safeSegment(trajectoryId, 'trajectoryId')}/manifest.json`,
  /**
   * One steps object per activity attempt (the first keeps the plain name): a retry and a zombie attempt
   * of the same episode never overwrite each other's steps, so the manifest that wins always names steps
   * whose sha256 it recorded (activities/env/manifest-commit.ts).
   */
  trajectorySteps: (campaignId: string, trajectoryId: string, attempt = 1) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/trajectories/${safeSegment(trajectoryId, 'trajectoryId')}/${attempt <= 1 ? 'steps.jsonl' : `steps-a${attempt}.jsonl`}`,
  /** The attempt that wrote a steps object (the inverse of trajectorySteps' file name). */
  attemptOfStepsKey: (stepsKey: string): number => Number(/\/steps-a(\d+)\.jsonl$/.exec(stepsKey)?.[1] ?? 1),
  trajectoryPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/trajectories/`,
  checkpointPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/`,
  checkpointManifest: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/manifest.json`,
  checkpointWeights: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/weights.safetensors`,
  checkpointOptimizer: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/optimizer.safetensors`,
  ledgerEntry: (campaignId: string, trainStep: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/ledger/step-${pad(trainStep)}.json`,
  /**
   * A train step's per-sample record (schemas/records.ts TrainSampleRecordSchema), one per attempt (`attempt`
   * is the tag of the attempt's checkpoint objects): the ledger entry names the one of the attempt whose
   * checkpoint it commits. Outside ledger/, whose readers take every object there for a ledger entry.
   */
  trainSamples: (campaignId: string, trainStep: number, attempt: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/train-samples/step-${pad(trainStep)}-${safeSegment(attempt, 'attempt')}.jsonl`,
  trainSamplesPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/train-samples/`,
  ledgerPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/ledger/`,
  /**
   * A pooled success. With an instruction key the name starts with it (`<key>=<trajectoryId>.json`), so a
   * lookup by instruction lists the task once and reads only that instruction's entries.
   */
  poolEntry: (campaignId: string, taskId: string, trajectoryId: string, instructionKey?: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/pool/${safeSegment(taskId, 'taskId')}/${instructionKey ? `${safeSegment(instructionKey, 'instructionKey')}=` : ''}${safeSegment(trajectoryId, 'trajectoryId')}.json`,
  poolPrefix: (campaignId: string, taskId?: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/pool/${taskId ? `${safeSegment(taskId, 'taskId')}/` : ''}`,
  campaignState: (campaignId: string, name: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/state/${safeSegment(name, 'state name')}.json`,
  discardRecord: (campaignId: string, groupId: string, event: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/discards/${safeSegment(groupId, 'groupId')}-${safeSegment(event, 'event')}.json`,
  discardPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/discards/`,
  evalPrefix: (campaignId: string) => `campaigns/${safeSegment(campaignId, 'campaignId')}/evals/`,
  model: (specHash: string, graph: 'forward' | 'train') => `models/${safeSegment(specHash, 'specHash')}/${graph}.onnx`,
  /**
   * A VLM checkpoint: a Hugging Face safetensors folder (full weights or a LoRA adapter) stored file by
   * file under `v<N>/hf/`, and its manifest (file names, sizes, sha256) at `v<N>/hf.json`, written last.
   * Not `…/manifest.json`: listCheckpoints reads those as the embedded policy's manifests.
   */
  hfCheckpointManifest: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/hf.json`,
  hfCheckpointFile: (campaignId: string, version: number, file: string) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/hf/${safeSegment(file, 'file name')}`,
  /**
   * Written by the VLM trainer (python/dartflow_vlm/keys.py), only if absent, before any file of v<N>:
   * the one train-step attempt that owns the version number.
   */
  hfCheckpointClaim: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/hf-claim.json`,
  /** The VLM trainer's AdamW moments of v<N> (hf.json `optimizerState`); outside hf/, so vLLM never loads them. */
  hfCheckpointOptimizer: (campaignId: string, version: number) =>
    `campaigns/${safeSegment(campaignId, 'campaignId')}/checkpoints/v${pad(version)}/hf-optimizer.safetensors`,
  /**
   * A VLM step's prompt record `{schemaVersion: 1, messages}` (vlm/prompt-record.ts), content-addressed
   * like screenshots: the exact chat messages vLLM sampled from, which the trainer re-scores.
   */
  vlmPrompt: (sha256: string) => `prompts/${sha256}.json`,
};

/** Where each policy server announces itself (url, version it serves) so campaigns on any machine find it. */
export const registryKeys = {
  policyServerPrefix: 'registry/policy-servers/',
  policyServer: (serverId: string) => `registry/policy-servers/${safeSegment(serverId, 'serverId')}.json`,
};
