"""Validation of the trainer's activity inputs and records against the JSON Schemas generated from the
TypeScript zod schemas (schemas/*.json, scripts/gen-python-schemas.ts): the Python trainer accepts and
refuses exactly what the TypeScript one does, and fills the same defaults.

    validate_train_step_input(raw) -> dict with defaults applied, or raises InvalidTrainInput

JSON Schema cannot say "finite number" (zod's refine and z.number() reject NaN/±∞, and Python's json
module does parse NaN and Infinity), so every number is also checked for finiteness here.
"""

import copy
import json
import math
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]  # no stubs in the lock

from .errors import InvalidTrainInput

CONTRACTS = (
    "train-step-input",
    "behaviour-clone-input",
    "train-step-result",
    "step-record",
    "trajectory-manifest",
    "checkpoint-manifest",
    "ledger-entry",
    "train-sample-record",
    "hf-checkpoint-manifest",
    "prompt-record",
)


@cache
def schema(name: str) -> dict[str, Any]:
    if name not in CONTRACTS:
        raise KeyError(f"unknown contract {name!r}; known: {', '.join(CONTRACTS)}")
    text = resources.files(__package__).joinpath("schemas", f"{name}.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    Draft202012Validator.check_schema(loaded)
    return loaded


@cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name))


def _path(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def _non_finite(value: Any, at: list[str | int]) -> list[str]:
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{_path(at)}: not a finite number ({value})"]
    if isinstance(value, dict):
        return [m for k, v in value.items() for m in _non_finite(v, [*at, k])]
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _non_finite(v, [*at, i])]
    return []


def problems(name: str, value: Any) -> list[str]:
    """Every violation, as `path: message` (zod's issue format, so both trainers' errors read alike)."""
    issues = []
    for e in sorted(_validator(name).iter_errors(value), key=lambda e: list(map(str, e.absolute_path))):
        at = list(e.absolute_path)
        if e.validator == "required":
            # jsonschema reports a missing field at its parent; zod (and a reader) names the field.
            missing = [k for k in e.validator_value if isinstance(e.instance, dict) and k not in e.instance]
            at.append(missing[0] if len(missing) == 1 else e.message.split("'")[1])
        issues.append(f"{_path(at)}: {e.message}")
    return issues + _non_finite(value, [])


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """A copy of `value` with the schema's `default`s filled in for absent object properties, recursively
    (what zod's parse returns). Only plain `properties`/`items` are followed: the contracts keep their
    defaults there."""
    if isinstance(value, dict) and node.get("type") == "object":
        out = dict(value)
        for key, prop in node.get("properties", {}).items():
            if key not in out and "default" in prop:
                out[key] = copy.deepcopy(prop["default"])
            if key in out:
                out[key] = apply_defaults(prop, out[key])
        return out
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [apply_defaults(node["items"], v) for v in value]
    return value


def parse(name: str, value: Any, what: str) -> dict[str, Any]:
    """The validated value with defaults applied; InvalidTrainInput naming every bad field otherwise."""
    found = problems(name, value)
    if found:
        raise InvalidTrainInput(f"invalid {what} input: {'; '.join(found)}")
    result: dict[str, Any] = apply_defaults(schema(name), value)
    return result


def validate_train_step_input(raw: Any) -> dict[str, Any]:
    parsed = parse("train-step-input", raw, "trainStep")
    # The rule runTrainStep adds after parsing: the lineage starts at the head.
    allowed = parsed.get("allowedVersions")
    if allowed is not None and allowed[0] != parsed["fromVersion"]:
        raise InvalidTrainInput(
            f"invalid trainStep input: allowedVersions must start with fromVersion {parsed['fromVersion']} "
            f"(the head), got {','.join(map(str, allowed))}"
        )
    return parsed


def validate_behaviour_clone_input(raw: Any) -> dict[str, Any]:
    return parse("behaviour-clone-input", raw, "behaviourClone")
