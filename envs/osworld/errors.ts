/**
 * Typed failures of the OSWorld env. All but TaskConfigError are EnvErrors: retryable infrastructure
 * failures that make the episode an infrastructure failure (reward null), never a reward 0.
 */
import { EnvCrashedError, EnvError, EnvProtocolError, EnvUnavailableError } from '../errors';

/** Every env server refused a lease because the token's concurrency quota is used up (HTTP 429). */
export class EnvServerQuotaError extends EnvUnavailableError {}

/** The VM's /screenshot answered with bytes that are not a PNG image. */
export class ScreenshotNotImageError extends EnvProtocolError {}

/** One of OSWorld's setup steps (task `config` or `evaluator.postconfig`) raised in the sidecar. */
export class OsworldSetupError extends EnvCrashedError {}

/** An OSWorld getter or metric function raised (or returned no score) in the sidecar. */
export class OsworldEvaluatorError extends EnvError {
  readonly retryable = true;
}
