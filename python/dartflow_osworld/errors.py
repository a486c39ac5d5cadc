"""Typed sidecar errors. Each becomes an HTTP error `{"error": {"type", "message", "field"}}` that the
TypeScript adapter (envs/osworld/sidecar-client.ts) maps to dartflow's env errors: none of them is ever a
reward, because a setup or evaluator that could not run says nothing about what the agent did.
"""

from __future__ import annotations


class SidecarError(Exception):
    """Base class: `kind` is the wire type, `status` the HTTP status, `field` the request field at fault."""

    kind = "SidecarError"
    status = 500

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def to_wire(self) -> dict[str, object]:
        body: dict[str, object] = {"type": self.kind, "message": str(self)}
        if self.field is not None:
            body["field"] = self.field
        return body


class BadRequestError(SidecarError):
    """The request body is not what the protocol says (names the field)."""

    kind = "BadRequest"
    status = 400


class UnauthorizedError(SidecarError):
    kind = "Unauthorized"
    status = 401


class UnsupportedError(SidecarError):
    """A metric, getter or setup step this install cannot run (its module did not import, or no such name)."""

    kind = "Unsupported"
    status = 422


class SetupFailedError(SidecarError):
    """One of OSWorld's setup steps (task `config` or `evaluator.postconfig`) raised."""

    kind = "SetupFailed"
    status = 502


class EvaluatorError(SidecarError):
    """A getter or metric function raised, or returned something that is not a score."""

    kind = "EvaluatorError"
    status = 500


class VmUnreachableError(SidecarError):
    """The VM did not answer (dead, or a request to it failed during setup/evaluation)."""

    kind = "VmUnreachable"
    status = 502
