/**
 * The key that groups episodes by what they were asked to do: the experience pool keyed by instruction
 * (curation.poolKey) matches a failed group to successes of the same instruction. A short hash rather
 * than the text keeps trajectory summaries (carried in the campaign's state) and object names small.
 */
import { createHash } from 'node:crypto';

/** 16 hex digits of the sha256 of the instruction text (exact text: "Click orange" ≠ "click orange"). */
export function instructionKeyOf(instruction: string): string {
  return createHash('sha256').update(instruction, 'utf8').digest('hex').slice(0, 16);
}
