/**
 * A VLM step's prompt record: the OpenAI chat messages exactly as they were sent to vLLM (system prompt,
 * history, screenshots inline as `data:` URLs), stored as `{"schemaVersion": 1, "messages": [...]}` under
 * a content-addressed key (storage/keys.ts `vlmPrompt`: `prompts/<sha256 of the bytes>.json`). The step
 * record names it (`promptKey`); the Python trainer (python/dartflow_vlm/samples.py) rebuilds the prompt
 * from it and re-scores the response's token ids, so what is stored must be what vLLM sampled from.
 *
 * The policy builds the record (pure: bytes and key); the env activity stores it with the screenshots.
 * Screenshots are inline, not references: the record is then self-contained (the trainer needs nothing
 * else to rebuild the prompt) at the price of storing a history screenshot once per step that shows it.
 */
import { z } from 'zod';
import { keys } from '../storage/keys';
import { sha256Hex } from '../storage/object-store';
import type { ChatMessage } from './prompt';

const PartSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({
    type: z.literal('image_url'),
    // The trainer decodes images offline: only inline data URLs (python/dartflow_vlm/messages.py).
    image_url: z.object({ url: z.string().startsWith('data:', 'an inline data: URL (the trainer works offline)') }),
  }),
]);

export const PromptRecordSchema = z.object({
  schemaVersion: z.literal(1),
  messages: z
    .array(
      z.object({
        role: z.enum(['system', 'user', 'assistant']),
        content: z.union([z.string(), z.array(PartSchema).min(1)]),
      })
    )
    .min(1),
});
export type PromptRecord = z.infer<typeof PromptRecordSchema>;

/** What the policy hands the env activity: the stored bytes and their content-addressed key. */
export interface PromptRecordObject {
  key: string;
  body: Buffer;
}

export function promptRecordObject(messages: ChatMessage[]): PromptRecordObject {
  const record: PromptRecord = { schemaVersion: 1, messages };
  const body = Buffer.from(JSON.stringify(record));
  return { key: keys.vlmPrompt(sha256Hex(body)), body };
}
