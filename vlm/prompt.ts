/**
 * UI-TARS chat layout (dart-spec.md §2.3–2.4): a fixed system message, one user message with the
 * computer-use template + the first screenshot, then alternating assistant "Thought/Action" turns and
 * image-only user turns. The context keeps at most `maxImages` screenshots (oldest dropped first, even
 * the one attached to the instruction) and at most `maxTexts` assistant turns, as DART's runner does.
 *
 * The template is DART's UI-TARS computer-use prompt word for word (its rollouter's prompt with the
 * note about the machine's password), because the model was trained and RL-tuned on exactly that
 * text: rewording it changes what the model does. `callUser` adds UI-TARS's `call_user()` line (DART
 * has it as a variant, off by default there); `password: null` drops the password note.
 */

export const UITARS_SYSTEM_PROMPT = 'You are a helpful assistant.';

export interface PromptOptions {
  /** Language of the Thought part (DART: English). */
  language?: string;
  /** List `call_user()` in the action space (the agent gives up / asks for help; the episode ends). */
  callUser?: boolean;
  /** The machine's password for sudo tasks (DART's VMs: "password"); null leaves the note out. */
  password?: string | null;
}

export const DEFAULT_PROMPT_OPTIONS: Required<PromptOptions> = {
  language: 'English',
  callUser: true,
  password: 'password',
};

/** The action space as the prompt lists it; points are (x,y) in the screenshot's coordinate convention. */
export function uiTarsActionSpace(callUser: boolean): string[] {
  return [
    "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')",
    "hotkey(key='')",
    'type(content=\'\') #If you want to submit your input, use "\\n" at the end of `content`.',
    "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')",
    'wait() #Sleep for 5s and take a screenshot to check for any changes.',
    "finished(content='xxx') # Use escape characters \\', \\\", and \\n in content part to ensure we can parse the content in normal python string format.",
    ...(callUser
      ? [
          "call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.",
        ]
      : []),
  ];
}

/** The user template with the task instruction (the text part of the first user message). */
export function computerUsePrompt(instruction: string, options: PromptOptions = {}): string {
  const o = { ...DEFAULT_PROMPT_OPTIONS, ...options };
  return [
    'You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.',
    '',
    '## Output Format',
    '```',
    'Thought: ...',
    'Action: ...',
    '```',
    '',
    '## Action Space',
    '',
    ...uiTarsActionSpace(o.callUser),
    '',
    '## Note',
    `- Use ${o.language} in \`Thought\` part.`,
    '- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.',
    ...(o.password !== null
      ? [`- My computer's password is '${o.password}', feel free to use it when you need sudo rights.`]
      : []),
    '',
    '## User Instruction',
    instruction,
    '',
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
  prompt: PromptOptions = {}
): ChatMessage[] {
  const firstImage = Math.max(0, turns.length - limits.maxImages);
  const answered = turns.filter((t) => t.response !== undefined).length;
  const firstText = Math.max(0, answered - limits.maxTexts);
  const messages: ChatMessage[] = [{ role: 'system', content: UITARS_SYSTEM_PROMPT }];
  const intro: ChatContentPart[] = [{ type: 'text', text: computerUsePrompt(instruction, prompt) }];
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
