"""OSWorld's SetupController run by the sidecar against a fake VM, and the HTTP surface."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from dartflow_osworld.errors import UnsupportedError, VmUnreachableError
from dartflow_osworld.server import Sidecar, serve

from .fake_vm import FakeVm


def test_setup_steps_reach_the_vm(sidecar: Sidecar, vm: FakeVm) -> None:
    config = [
        {"type": "launch", "parameters": {"command": ["gedit", "/home/user/a.txt"]}},
        {"type": "sleep", "parameters": {"seconds": 0.01}},
    ]
    out = sidecar.setup({"leaseId": "emu-1", "taskId": "os.t1", "vm": vm.address(), "config": config})
    assert out == {"ok": True, "steps": 2}
    assert vm.setup_calls == [("/setup/launch", {"command": ["gedit", "/home/user/a.txt"], "shell": False})]


def test_unknown_setup_step_and_dead_vm(sidecar: Sidecar, vm: FakeVm) -> None:
    with pytest.raises(UnsupportedError) as err:
        sidecar.setup(
            {
                "leaseId": "e",
                "taskId": "t",
                "vm": vm.address(),
                "config": [{"type": "teleport", "parameters": {}}],
            }
        )
    assert err.value.field == "config[0].type"
    vm.close()
    with pytest.raises(VmUnreachableError):
        sidecar.setup(
            {
                "leaseId": "e",
                "taskId": "t",
                "vm": vm.address(),
                "config": [{"type": "sleep", "parameters": {"seconds": 0}}],
            }
        )


def post(url: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, json.dumps(payload).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_http_errors_are_typed(sidecar: Sidecar, vm: FakeVm) -> None:
    server = serve(sidecar, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, out = post(
            base + "/v1/evaluate", {"leaseId": "e", "taskId": "t", "vm": {"host": "127.0.0.1"}}
        )
        assert status == 400
        assert out["error"]["field"] == "vm.serverPort"
        ev = {
            "func": "exact_match",
            "result": {"type": "rule", "rules": "a"},
            "expected": {"type": "rule", "rules": {"expected": "a"}},
        }
        status, out = post(
            base + "/v1/evaluate", {"leaseId": "e", "taskId": "t", "vm": vm.address(), "evaluator": ev}
        )
        assert (status, out) == (200, {"reward": 1.0})
    finally:
        server.shutdown()
        server.server_close()
