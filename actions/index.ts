/** Action text formats for canonical actions: UI-TARS (both coordinate conventions) and pyautogui. */
export { ActionParseError, type ActionParseErrorCode } from './errors';
export {
  smartResize,
  SMART_RESIZE_FACTOR,
  SMART_RESIZE_MIN_PIXELS,
  SMART_RESIZE_MAX_PIXELS,
  type Size,
} from './smart-resize';
export {
  uiTarsCoordSpace,
  renderUiTarsAction,
  renderUiTarsResponse,
  parseUiTarsResponse,
  quoteArg,
  type CoordSpace,
  type UiTarsModel,
  type ParseResult,
  type RenderOptions,
} from './uitars';
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
