"""The sidecar's HTTP API (stdlib; JSON in, JSON out). One request = one setup or one evaluation for the
VM named in the body; nothing is kept between requests except OSWorld's download cache.

  GET  /v1/health    → {"ok": true, "desktopEnv": "1.0.2", "metrics": [...], "getters": [...],
                        "unavailable": {module: import error}}
  POST /v1/setup     {"leaseId", "taskId", "vm": {host, serverPort, chromiumPort?, vlcPort?}, "config": [...]}
                     → {"ok": true, "steps": n}
  POST /v1/evaluate  {"leaseId", "taskId", "vm", "evaluator": {...}, "lastAction": "DONE"|"FAIL"|…|null}
                     → {"reward": float}
  errors             → {"error": {"type", "message", "field"?}} with the status of errors.py
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .errors import BadRequestError, SidecarError, UnauthorizedError
from .operations import Settings, evaluate, run_setup
from .osworld_modules import OsworldModules
from .vm import LeasedVm, VmAddress, make_controller_class

log = logging.getLogger("dartflow_osworld")
MAX_BODY = 8 * 1024 * 1024
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class Sidecar:
    def __init__(self, mods: OsworldModules, cache_root: Path, settings: Settings, token: str | None) -> None:
        self.mods = mods
        self.cache_root = cache_root
        self.settings = settings
        self.token = token
        self._controller = make_controller_class(mods.python_controller) if mods.python_controller else None

    def health(self) -> dict[str, Any]:
        return {
            "ok": True,
            "desktopEnv": self.mods.version,
            "metrics": [*sorted(self.mods.metrics), "infeasible"],
            "getters": sorted(g.removeprefix("get_") for g in self.mods.getters),
            "unavailable": self.mods.failed,
        }

    def _vm(self, body: dict[str, Any]) -> LeasedVm:
        address = VmAddress.parse(body.get("vm"))
        task_id = body.get("taskId")
        lease_id = body.get("leaseId")
        if not isinstance(task_id, str) or not task_id:
            raise BadRequestError("'taskId' must be a non-empty string", "taskId")
        if not isinstance(lease_id, str) or not lease_id:
            raise BadRequestError("'leaseId' must be a non-empty string", "leaseId")
        if self._controller is None or self.mods.setup_controller is None:
            raise SidecarError(
                f"desktop-env's controllers did not import: {self.mods.failed.get('desktop_env.controllers')}"
            )
        # One cache folder per task (OSWorld's layout: downloads are reused across episodes of the task).
        cache_dir = self.cache_root / _SAFE.sub("_", task_id)
        cache_dir.mkdir(parents=True, exist_ok=True)
        failures: list[str] = []
        controller = self._controller(address, self.settings.retry_interval_s, failures)
        setup = self.mods.setup_controller(
            vm_ip=address.host,
            server_port=address.server_port,
            chromium_port=address.chromium_port,
            vlc_port=address.vlc_port,
            cache_dir=str(cache_dir),
        )
        return LeasedVm(address, controller, setup, str(cache_dir), failures)

    def setup(self, body: dict[str, Any]) -> dict[str, Any]:
        vm = self._vm(body)
        return {"ok": True, "steps": run_setup(vm, body.get("config"), "config", self.settings)}

    def evaluate(self, body: dict[str, Any]) -> dict[str, Any]:
        vm = self._vm(body)
        last = body.get("lastAction")
        if last is not None and not isinstance(last, str):
            raise BadRequestError("'lastAction' must be a string or null", "lastAction")
        return {"reward": evaluate(vm, self.mods, body.get("evaluator"), last, self.settings)}


def make_handler(sidecar: Sidecar) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), format % args)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorize(self) -> None:
            if sidecar.token is None:
                return
            got = self.headers.get("authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {sidecar.token}".encode()):
                raise UnauthorizedError("missing or wrong bearer token", "authorization")

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                raise BadRequestError(f"body of {length} bytes is over {MAX_BODY}", "(body)")
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError as err:
                raise BadRequestError(f"body is not JSON: {err}", "(body)") from err
            if not isinstance(body, dict):
                raise BadRequestError("body must be a JSON object", "(body)")
            return body

        def _dispatch(self, method: str) -> None:
            try:
                self._authorize()
                if method == "GET" and self.path == "/v1/health":
                    self._send(200, sidecar.health())
                elif method == "POST" and self.path == "/v1/setup":
                    self._send(200, sidecar.setup(self._body()))
                elif method == "POST" and self.path == "/v1/evaluate":
                    self._send(200, sidecar.evaluate(self._body()))
                else:
                    self._send(
                        404, {"error": {"type": "NotFound", "message": f"no route {method} {self.path}"}}
                    )
            except SidecarError as err:
                log.warning("%s %s: %s: %s", method, self.path, err.kind, err)
                self._send(err.status, {"error": err.to_wire()})
            except Exception as err:  # a bug of ours: still a typed answer, never a score
                log.exception("%s %s failed", method, self.path)
                self._send(500, {"error": {"type": "Internal", "message": f"{type(err).__name__}: {err}"}})

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

    return Handler


def serve(sidecar: Sidecar, host: str, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), make_handler(sidecar))
    server.daemon_threads = True
    return server
