export { OsworldEnv } from './env';
export { OsworldEnvPool } from './pool';
export {
  OSWORLD_ENV_VARS,
  OsworldEnvOptionsSchema,
  osworldOptionsFromEnv,
  parseOsworldOptions,
  type OsworldEnvOptions,
  type OsworldEnvSettings,
} from './config';
export { EnvServerQuotaError, OsworldEvaluatorError, OsworldSetupError, ScreenshotNotImageError } from './errors';
export { PYAUTOGUI_PREFIX } from './vm';
export { startSidecar, type SidecarProcess } from './sidecar-process';
