"""Task setup and evaluation for one leased VM, as OSWorld's `DesktopEnv.reset` / `DesktopEnv.evaluate`
do them (desktop_env/desktop_env.py 1.0.2, lines 244-306 and 425-488), with one difference on purpose:
an exception anywhere (a setup step, a getter, a metric) is a typed error, never a score. OSWorld scores
a getter's FileNotFoundError 0 (the agent did not produce the file): that stays a task outcome here too."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import BadRequestError, EvaluatorError, SetupFailedError, UnsupportedError, VmUnreachableError
from .osworld_modules import OsworldModules
from .vm import LeasedVm, probe


@dataclass(frozen=True)
class Settings:
    probe_timeout_s: float = 10.0
    # OSWorld's controller waits 5 s between its 3 tries; tests shorten it.
    retry_interval_s: float = 5.0


def _steps(raw: object, field_name: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequestError(f"'{field_name}' must be a list of setup steps", field_name)
    out: list[dict[str, Any]] = []
    for i, step in enumerate(raw):
        if not isinstance(step, dict) or not isinstance(step.get("type"), str):
            raise BadRequestError(
                f"'{field_name}[{i}]' must be an object with a string 'type'", f"{field_name}[{i}]"
            )
        params = step.get("parameters", {})
        if not isinstance(params, dict):
            raise BadRequestError(
                f"'{field_name}[{i}].parameters' must be an object", f"{field_name}[{i}].parameters"
            )
        out.append({"type": step["type"], "parameters": params})
    return out


def run_setup(vm: LeasedVm, raw_steps: object, field_name: str, settings: Settings) -> int:
    """Runs OSWorld's SetupController over the steps; returns how many ran."""
    steps = _steps(raw_steps, field_name)
    if not steps:
        return 0
    for i, step in enumerate(steps):
        if not hasattr(vm.setup_controller, f"_{step['type']}_setup"):
            raise UnsupportedError(
                f"OSWorld has no setup step type {step['type']!r}", f"{field_name}[{i}].type"
            )
    # Fail fast on a dead VM: SetupController itself would probe it 20 times, 5 s apart.
    probe(vm.address, settings.probe_timeout_s)
    try:
        ok = vm.setup_controller.setup(steps)
    except Exception as err:
        raise SetupFailedError(f"{field_name}: {type(err).__name__}: {err}", field_name) from err
    if ok is False:
        raise VmUnreachableError(f"VM {vm.address.base_url} stopped answering during {field_name}", "vm")
    # OSWorld's steps log a failed request and carry on; a VM that is gone now was not set up.
    probe(vm.address, settings.probe_timeout_s)
    return len(steps)


def _score(value: object, field_name: str, func: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return float(value)
    raise EvaluatorError(f"metric {func} returned {value!r}, which is not a finite number", field_name)


def _options(evaluator: dict[str, Any], n: int, is_list: bool) -> list[dict[str, Any]]:
    raw = evaluator.get("options")
    if isinstance(raw, list):
        opts = [o if o else {} for o in raw]
    elif raw is None:
        opts = [{}] * n
    elif is_list:
        raise BadRequestError("with a list 'func', 'options' must be a list", "evaluator.options")
    else:
        opts = [raw]
    if len(opts) != n or not all(isinstance(o, dict) for o in opts):
        raise BadRequestError(f"'evaluator.options' must give {n} option objects", "evaluator.options")
    return opts


def _as_list(evaluator: dict[str, Any], key: str, n: int, is_list: bool) -> list[Any]:
    raw = evaluator.get(key)
    if not is_list:
        return [raw]
    if raw is None:
        return [None] * n
    if not isinstance(raw, list) or len(raw) != n:
        raise BadRequestError(
            f"with {n} metric functions, 'evaluator.{key}' must be a list of {n}", f"evaluator.{key}"
        )
    return raw


def evaluate(
    vm: LeasedVm, mods: OsworldModules, evaluator: object, last_action: str | None, settings: Settings
) -> float:
    if not isinstance(evaluator, dict):
        raise BadRequestError("'evaluator' must be an OSWorld evaluator object", "evaluator")
    func = evaluator.get("func")
    is_list = isinstance(func, list)
    funcs: list[object] = list(func) if isinstance(func, list) else [func]
    if not funcs or not all(isinstance(f, str) and f for f in funcs):
        raise BadRequestError("'evaluator.func' must be a metric name or a list of them", "evaluator.func")
    names = [str(f) for f in funcs]
    conj = evaluator.get("conj", "and")
    if conj not in ("and", "or"):
        raise BadRequestError(f"'evaluator.conj' must be 'and' or 'or', got {conj!r}", "evaluator.conj")

    if func == "infeasible":
        run_setup(vm, evaluator.get("postconfig"), "evaluator.postconfig", settings)
        return 1.0 if last_action == "FAIL" else 0.0
    # Resolve everything before running anything: an unsupported metric is never half-evaluated.
    fields = [f"evaluator.func[{i}]" if is_list else "evaluator.func" for i in range(len(names))]
    metrics = [mods.metric(n, f) for n, f in zip(names, fields, strict=True)]
    results = _as_list(evaluator, "result", len(names), is_list)
    expecteds = _as_list(evaluator, "expected", len(names), is_list)
    options = _options(evaluator, len(names), is_list)

    def rkey(i: int) -> str:
        return f"evaluator.result[{i}]" if is_list else "evaluator.result"

    def ekey(i: int) -> str:
        return f"evaluator.expected[{i}]" if is_list else "evaluator.expected"

    result_getters = [_getter(mods, spec, rkey(i), required=True) for i, spec in enumerate(results)]
    expected_getters = [_getter(mods, spec, ekey(i), required=False) for i, spec in enumerate(expecteds)]

    run_setup(vm, evaluator.get("postconfig"), "evaluator.postconfig", settings)
    if last_action == "FAIL":
        return 0.0

    scores: list[float] = []
    for i, metric in enumerate(metrics):
        getter = result_getters[i]
        assert getter is not None
        try:
            result_state = getter(vm, results[i])
        except FileNotFoundError:
            # OSWorld: the file the task asks for is missing → a failed task, not an error.
            if not is_list or conj == "and":
                _check_vm(vm, settings)
                return 0.0
            result_state = None
        except Exception as err:
            raise EvaluatorError(
                f"getter get_{results[i]['type']} raised {type(err).__name__}: {err}", rkey(i)
            ) from err
        args: list[Any] = [result_state]
        expected_getter = expected_getters[i]
        if expected_getter is not None:
            try:
                args.append(expected_getter(vm, expecteds[i]))
            except Exception as err:
                raise EvaluatorError(
                    f"getter get_{expecteds[i]['type']} raised {type(err).__name__}: {err}", ekey(i)
                ) from err
        try:
            raw_score = metric(*args, **options[i])
        except Exception as err:
            raise EvaluatorError(f"metric {names[i]} raised {type(err).__name__}: {err}", fields[i]) from err
        score = _score(raw_score, fields[i], names[i])
        if is_list and conj == "and" and score == 0.0:
            _check_vm(vm, settings)
            return 0.0
        if is_list and conj == "or" and score == 1.0:
            _check_vm(vm, settings)
            return 1.0
        scores.append(score)
    _check_vm(vm, settings)
    if not is_list:
        return scores[0]
    return sum(scores) / len(scores) if conj == "and" else max(scores)


def _getter(mods: OsworldModules, spec: object, field_name: str, required: bool) -> Callable[..., Any] | None:
    if spec is None or spec == {} or spec == []:
        if required:
            raise BadRequestError(
                f"'{field_name}' is missing: a getter spec {{type, …}} is needed", field_name
            )
        return None
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise BadRequestError(f"'{field_name}' must be a getter spec {{type, …}}", field_name)
    return mods.getter(spec["type"], f"{field_name}.type")


def _check_vm(vm: LeasedVm, settings: Settings) -> None:
    """A score computed from files the VM failed to deliver is not a score: report the VM instead."""
    if vm.transport_failures:
        raise VmUnreachableError(
            f"VM {vm.address.base_url} failed during evaluation: {'; '.join(vm.transport_failures[:3])}", "vm"
        )
    probe(vm.address, settings.probe_timeout_s)
