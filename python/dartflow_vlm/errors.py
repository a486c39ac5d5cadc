"""The trainer's typed, non-retryable errors: the same `type` names as the TypeScript trainer's
ApplicationFailures (activities/trainer/train-step.ts), so workflows and operators see one vocabulary
whichever trainer ran the step. The Temporal worker turns them into
`ApplicationError(message, type=err.type, non_retryable=True)`."""


class TrainerError(Exception):
    """Base: a train step refused for a reason a retry cannot change."""

    type = "TrainerError"
    non_retryable = True


class InvalidTrainInput(TrainerError):  # noqa: N818 (the TypeScript trainer's failure type name)
    """The activity input (or the batch it names) is not trainable: fix the caller, do not retry."""

    type = "InvalidTrainInput"


class NonFiniteLossError(TrainerError):
    """NaN/∞ in an input, the loss or the gradients: refused, the previous checkpoint stays current."""

    type = "NonFiniteLossError"


class CheckpointMismatchError(TrainerError):
    """A checkpoint of another model shape than the one being trained."""

    type = "CheckpointMismatchError"


class CheckpointUnavailableError(TrainerError):
    """A checkpoint object the step needs is missing or corrupt."""

    type = "CheckpointUnavailableError"
