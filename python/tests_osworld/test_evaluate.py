"""OSWorld's own getters and metric functions, run by the sidecar on local files served by a fake VM."""

from __future__ import annotations

from typing import Any

import pytest

from dartflow_osworld.errors import BadRequestError, EvaluatorError, UnsupportedError, VmUnreachableError
from dartflow_osworld.server import Sidecar

from .fake_vm import FakeVm


def body(vm: FakeVm, evaluator: dict[str, Any], last: str | None = "DONE") -> dict[str, Any]:
    return {
        "leaseId": "emu-1",
        "taskId": "vs_code.t1",
        "vm": vm.address(),
        "evaluator": evaluator,
        "lastAction": last,
    }


def vm_file(name: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": f"/home/user/{name}", "dest": name}


def write(vm: FakeVm, name: str, text: str) -> None:
    target = vm.root / "home" / "user" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_compare_text_file_with_options(sidecar: Sidecar, vm: FakeVm) -> None:
    write(vm, "out.txt", "hello   world\n\n")
    write(vm, "gold.txt", "hello world")
    ev = {"func": "compare_text_file", "result": vm_file("out.txt"), "expected": vm_file("gold.txt")}
    assert sidecar.evaluate(body(vm, ev))["reward"] == 0.0
    ev["options"] = {"ignore_blanks": True}
    assert sidecar.evaluate(body(vm, ev))["reward"] == 1.0


def test_a_missing_result_file_scores_zero(sidecar: Sidecar, vm: FakeVm) -> None:
    write(vm, "gold.txt", "x")
    ev = {"func": "compare_text_file", "result": vm_file("absent.txt"), "expected": vm_file("gold.txt")}
    assert sidecar.evaluate(body(vm, ev))["reward"] == 0.0


def test_list_func_with_conj(sidecar: Sidecar, vm: FakeVm) -> None:
    write(vm, "a.txt", "one\ntwo\nthree\n")
    write(vm, "b.txt", "one\ntwo\nfour\n")
    ev: dict[str, Any] = {
        "func": ["exact_match", "diff_text_file"],
        "result": [{"type": "rule", "rules": "ok"}, vm_file("a.txt")],
        "expected": [{"type": "rule", "rules": {"expected": "ok"}}, vm_file("b.txt")],
    }
    # and: the mean of the scores (1 and difflib's 2/3)
    assert sidecar.evaluate(body(vm, ev))["reward"] == pytest.approx((1 + 2 / 3) / 2)
    ev["expected"][0] = {"type": "rule", "rules": {"expected": "no"}}
    assert sidecar.evaluate(body(vm, ev))["reward"] == 0.0
    ev["conj"] = "or"
    assert sidecar.evaluate(body(vm, ev))["reward"] == pytest.approx(2 / 3)


def test_infeasible_and_a_final_fail(sidecar: Sidecar, vm: FakeVm) -> None:
    assert sidecar.evaluate(body(vm, {"func": "infeasible"}, last="FAIL"))["reward"] == 1.0
    assert sidecar.evaluate(body(vm, {"func": "infeasible"}, last="DONE"))["reward"] == 0.0
    write(vm, "a.txt", "x")
    ev = {"func": "compare_text_file", "result": vm_file("a.txt"), "expected": vm_file("a.txt")}
    assert sidecar.evaluate(body(vm, ev, last="FAIL"))["reward"] == 0.0
    assert sidecar.evaluate(body(vm, ev, last="DONE"))["reward"] == 1.0


def test_a_metric_that_raises_is_an_error_naming_the_field(sidecar: Sidecar, vm: FakeVm) -> None:
    # literal_match raises NotImplementedError for an unknown `type` option.
    ev = {
        "func": ["exact_match", "literal_match"],
        "result": [{"type": "rule", "rules": "a"}, {"type": "rule", "rules": "a"}],
        "expected": [{"type": "rule", "rules": {"expected": "a"}}, {"type": "rule", "rules": "a"}],
        "options": [{}, {"type": "no-such-type"}],
    }
    with pytest.raises(EvaluatorError) as err:
        sidecar.evaluate(body(vm, ev))
    assert err.value.field == "evaluator.func[1]"
    assert "literal_match raised NotImplementedError" in str(err.value)


def test_unsupported_and_malformed_evaluators(sidecar: Sidecar, vm: FakeVm) -> None:
    with pytest.raises(UnsupportedError) as err:
        sidecar.evaluate(body(vm, {"func": "compare_docx_files", "result": vm_file("a.docx")}))
    assert err.value.field == "evaluator.func"
    assert "metrics.docs" in str(err.value)  # names the module that did not import
    with pytest.raises(UnsupportedError):
        sidecar.evaluate(body(vm, {"func": "exact_match", "result": {"type": "no_such_getter"}}))
    with pytest.raises(BadRequestError) as bad:
        sidecar.evaluate(
            body(vm, {"func": ["exact_match", "exact_match"], "result": [{"type": "rule", "rules": 1}]})
        )
    assert bad.value.field == "evaluator.result"


def test_a_vm_that_fails_during_evaluation_is_not_a_score(sidecar: Sidecar, vm: FakeVm) -> None:
    write(vm, "a.txt", "x")
    vm.broken = True
    ev = {"func": "compare_text_file", "result": vm_file("a.txt"), "expected": vm_file("a.txt")}
    with pytest.raises(VmUnreachableError) as err:
        sidecar.evaluate(body(vm, ev))
    assert err.value.field == "vm"
    assert "HTTP 500" in str(err.value)
