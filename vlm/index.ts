/** VLM adapter: UI-TARS over an OpenAI-compatible chat-completions endpoint (vLLM). */
export {
  chatCompletion,
  ChatCompletionError,
  type ChatClientOptions,
  type ChatRequest,
  type ChatResult,
} from './chat-client';
export {
  summarizeLogprobs,
  tokenEntropy,
  tokenIdsOf,
  type TokenLogprob,
  type TopLogprob,
  type LogprobSummary,
} from './logprobs';
export {
  buildMessages,
  computerUsePrompt,
  uiTarsActionSpace,
  DEFAULT_PROMPT_OPTIONS,
  type PromptOptions,
  addBoxTokens,
  pngDataUrl,
  UITARS_SYSTEM_PROMPT,
  DART_CONTEXT_LIMITS,
  type ChatMessage,
  type ChatContentPart,
  type VlmTurn,
  type ContextLimits,
} from './prompt';
export {
  createUiTarsPolicy,
  uiTarsPolicyFactory,
  uiTarsContextSettings,
  screenshotAsSent,
  coordSpaceOf,
  type UiTarsContextSettings,
  versionFromModelName,
  type UiTarsPolicyOptions,
  type UiTarsDecision,
} from './uitars-policy';
export { parseUiTarsOptions, UiTarsOptionsError, UiTarsOptionsSchema, type UiTarsOptionsInput } from './policy-options';
export { smartResizePng, resizeRgba, type ResizedScreenshot } from './screenshot';
export { promptRecordObject, PromptRecordSchema, type PromptRecord, type PromptRecordObject } from './prompt-record';
export {
  createUiTarsOraclePolicy,
  uiTarsOraclePolicyFactory,
  UITARS_ORACLE_SERVER,
  type UiTarsOracleOptions,
} from './uitars-oracle-policy';
