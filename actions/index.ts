/** Action text formats for canonical actions: UI-TARS (both coordinate conventions) and pyautogui. */
export { ActionParseError, type ActionParseErrorCode } from './errors';
export {
  smartResize,
  SMART_RESIZE_FACTOR,
  SMART_RESIZE_MIN_PIXELS,
  SMART_RESIZE_MAX_PIXELS,
  type Size,
  type SmartResizeOptions,
} from './smart-resize';
export {
  uiTarsCoordSpace,
  renderUiTarsAction,
  renderUiTarsResponse,
  parseUiTarsResponse,
  normalizeScrollDirection,
  quoteArg,
  UITARS_ACTION_NAMES,
  type UiTarsAction,
  type UiTarsExtraAction,
  type CoordSpace,
  type UiTarsModel,
  type ParseResult,
  type RenderOptions,
} from './uitars';
export { parseCalls, splitResponse, type RawCall, type GrammarResult } from './uitars-grammar';
export { runActionSequence, type ActionOutcome, type SequenceOutcome } from './sequence';
export { renderPyautogui } from './pyautogui';
export {
  GRID,
  NUM_CLICK_CELLS,
  EMBEDDED_TOKENS,
  EMBEDDED_ACTION_COUNT,
  embeddedIndexToAction,
  embeddedActionToIndex,
  embeddedValidMask,
  type EmbeddedToken,
} from './embedded';
