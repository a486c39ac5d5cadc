/**
 * Reads the committed histories (test/replay/histories/, written by scripts/record-histories.ts): the
 * index says what each file is; each file is the gzipped JSON of `historyToJSON`, read back with
 * `historyFromJSON` (the same format the Web UI download and `temporal workflow show --output json` give).
 */
import fs from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { historyFromJSON, type History } from '@temporalio/common/lib/proto-utils';
import { z } from 'zod';

export const HISTORIES_DIR = path.join(__dirname, 'histories');

const IndexSchema = z.object({
  recordedAt: z.string(),
  /** The long campaign of the `main` set. */
  campaignId: z.string(),
  /** The campaign of the `precollect` set (through the pre-collection phase). */
  precollectCampaignId: z.string().optional(),
  histories: z.array(
    z.object({
      /** Which recording (scripts/record-histories.ts --only): absent in older indexes, meaning `main`. */
      set: z.enum(['main', 'precollect', 'shards', 'shards-legacy']).default('main'),
      file: z.string().regex(/^[A-Za-z]+-[a-z0-9-]+\.json(\.gz)?$/),
      workflowType: z.string(),
      workflowId: z.string(),
      runId: z.string(),
      label: z.string(),
      events: z.number().int().positive(),
      jsonBytes: z.number().int().positive(),
      gzBytes: z.number().int().positive(),
    })
  ),
});
export type HistoryIndex = z.infer<typeof IndexSchema>;

export interface RecordedHistory extends Omit<HistoryIndex['histories'][number], 'gzBytes' | 'jsonBytes'> {
  history: History;
}

export function readIndex(): HistoryIndex {
  return IndexSchema.parse(JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, 'index.json'), 'utf8')));
}

/** The history file as plain JSON (tests mutate copies of it to show that a divergence is caught). */
export function readHistoryJson(file: string): unknown {
  const raw = fs.readFileSync(path.join(HISTORIES_DIR, file));
  return JSON.parse((file.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8'));
}

export function loadRecordedHistories(): RecordedHistory[] {
  return readIndex().histories.map(({ gzBytes: _gz, jsonBytes: _json, ...entry }) => ({
    ...entry,
    history: historyFromJSON(readHistoryJson(entry.file)),
  }));
}
