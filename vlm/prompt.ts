/**
 * UI-TARS chat layout (dart-spec.md §2.3–2.4): a fixed system message, one user message with the
 * computer-use template + the first screenshot, then alternating assistant "Thought/Action" turns and
 * image-only user turns. The context keeps at most `maxImages` screenshots (oldest dropped first, even
 * the one attached to the instruction) and at most `maxTexts` assistant turns, as DART's runner does.
 *
 * The wording of the template is dartflow's own; its sections (output format, action space, notes,
 * instruction) follow the UI-TARS computer-use prompt the model was trained with.
 */

export const UITARS_SYSTEM_PROMPT = 'You are a helpful assistant.';

/** The user template. Coordinates are written as (x,y) in the screenshot's pixel space. */
export function computerUsePrompt(instruction: string, language = 'English'): string {
  return [
    'You operate a computer through its screen. Given the task below and the screenshots so far, decide the next action.',
    '',
    '## Output Format',
    '```',
    'Thought: ...',
    'Action: ...',
    '```',
    '',
    '## Action Space',
    "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')",
    "hotkey(key='ctrl c') # keys separated by spaces, lowercase, at most 3",
    "type(content='xxx') # escape single quotes, double quotes and newlines; end with \\n to submit",
    "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')",
    'wait() # pause 5 seconds and take a new screenshot',
    "finished(content='xxx') # the task is done; escape quotes and newlines as in type",
    '',
    '## Note',
    `- Write the Thought in ${language}.`,
    '- In the Thought, give a short plan and then one sentence that summarizes the next action and its target element.',
    '- Output exactly one action per turn.',
    '',
    '## User Instruction',
    instruction,
  ].join('\n');
}

export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string | ChatContentPart[];
}

/** One past step as the adapter remembers it: the screenshot it saw and the text it answered. */
export interface VlmTurn {
  pngBase64: string;
  /** Assistant text of that step (absent for the current, unanswered screenshot). */
  response?: string;
}

export interface ContextLimits {
  maxImages: number;
  maxTexts: number;
}

export const DART_CONTEXT_LIMITS: ContextLimits = { maxImages: 5, maxTexts: 35 };

/** DART writes the image as `data:image;base64,…`; a proper media type is accepted by vLLM too and is clearer. */
export const pngDataUrl = (b64: string): string => `data:image/png;base64,${b64}`;

/**
 * UI-TARS was trained with points wrapped in box tokens; past assistant turns are rewritten that way
 * before they go back into the context (DART's add_box_token). Idempotent.
 */
export function addBoxTokens(text: string): string {
  return text.replace(
    /(start_box|end_box)='\s*(\(\s*-?\d+(?:\.\d+)?\s*,\s*-?\d+(?:\.\d+)?\s*\))\s*'/g,
    "$1='<|box_start|>$2<|box_end|>'"
  );
}

/**
 * Builds the messages for the current step. `turns` is the whole episode so far, oldest first; the last
 * turn is the current screenshot (no response yet).
 */
export function buildMessages(
  instruction: string,
  turns: readonly VlmTurn[],
  limits: ContextLimits = DART_CONTEXT_LIMITS,
  language?: string
): ChatMessage[] {
  const firstImage = Math.max(0, turns.length - limits.maxImages);
  const answered = turns.filter((t) => t.response !== undefined).length;
  const firstText = Math.max(0, answered - limits.maxTexts);
  const messages: ChatMessage[] = [{ role: 'system', content: UITARS_SYSTEM_PROMPT }];
  const intro: ChatContentPart[] = [{ type: 'text', text: computerUsePrompt(instruction, language) }];
  let textIndex = 0;
  turns.forEach((turn, i) => {
    const image: ChatContentPart = { type: 'image_url', image_url: { url: pngDataUrl(turn.pngBase64) } };
    if (i === 0) {
      // The instruction always stays; only its screenshot can age out of the window.
      if (i >= firstImage) intro.push(image);
      messages.push({ role: 'user', content: intro });
    } else if (i >= firstImage) {
      messages.push({ role: 'user', content: [image] });
    }
    if (turn.response !== undefined) {
      if (textIndex >= firstText) messages.push({ role: 'assistant', content: addBoxTokens(turn.response) });
      textIndex += 1;
    }
  });
  return messages;
}
