"""The leased VM as OSWorld's getters and setup controller see it: an object with the attributes
`DesktopEnv` has (controller, vm_ip, server_port, chromium_port, vlc_port, cache_dir, vm_platform), built
from the address the adapter sends. OSWorld's controller turns a failed request into `None`, which a
metric then scores 0; `StrictController` keeps OSWorld's behaviour but records every transport failure,
so the sidecar can report a VM that died during evaluation as an infrastructure failure instead."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import requests

from .errors import BadRequestError, VmUnreachableError


@dataclass(frozen=True)
class VmAddress:
    host: str
    server_port: int
    chromium_port: int
    vlc_port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.server_port}"

    @staticmethod
    def parse(raw: object) -> VmAddress:
        if not isinstance(raw, dict):
            raise BadRequestError("'vm' must be an object {host, serverPort, chromiumPort?, vlcPort?}", "vm")
        host = raw.get("host")
        if not isinstance(host, str) or not host:
            raise BadRequestError("'vm.host' must be a non-empty string", "vm.host")
        ports: dict[str, int] = {}
        for key, default in (("serverPort", None), ("chromiumPort", 9222), ("vlcPort", 8080)):
            value = raw.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
                raise BadRequestError(f"'vm.{key}' must be a TCP port number, got {value!r}", f"vm.{key}")
            ports[key] = value
        return VmAddress(host, ports["serverPort"], ports["chromiumPort"], ports["vlcPort"])


def probe(vm: VmAddress, timeout_s: float) -> None:
    """Any HTTP answer from the VM's control server means it is alive (OSWorld's setup probes /terminal)."""
    try:
        requests.get(vm.base_url + "/terminal", timeout=timeout_s)
    except requests.RequestException as err:
        raise VmUnreachableError(
            f"VM {vm.base_url} does not answer: {type(err).__name__}: {err}", "vm"
        ) from err


def make_controller_class(base: type[Any]) -> type[Any]:
    """A subclass of OSWorld's PythonController whose get_file tells a missing file (404: the agent did not
    produce it, a task outcome) from a VM that failed (no answer or another status: infrastructure)."""

    class StrictController(base):  # type: ignore[misc]
        def __init__(self, vm: VmAddress, retry_interval_s: float, failures: list[str]) -> None:
            super().__init__(vm.host, vm.server_port)
            self.retry_interval = retry_interval_s
            self._failures = failures

        def get_file(self, file_path: str) -> bytes | None:
            for _ in range(self.retry_times):
                try:
                    response = requests.post(
                        self.http_server + "/file", data={"file_path": file_path}, timeout=60
                    )
                except requests.RequestException as err:
                    self._failures.append(f"POST /file {file_path}: {type(err).__name__}: {err}")
                else:
                    if response.status_code == 200:
                        return response.content
                    if response.status_code == 404:
                        return None
                    self._failures.append(f"POST /file {file_path}: HTTP {response.status_code}")
                time.sleep(self.retry_interval)
            return None

    return StrictController


@dataclass
class LeasedVm:
    """What OSWorld's getters call `env`."""

    address: VmAddress
    controller: Any
    setup_controller: Any
    cache_dir: str
    transport_failures: list[str] = field(default_factory=list)
    _platform: str | None = None

    @property
    def vm_ip(self) -> str:
        return self.address.host

    @property
    def server_port(self) -> int:
        return self.address.server_port

    @property
    def chromium_port(self) -> int:
        return self.address.chromium_port

    @property
    def vlc_port(self) -> int:
        return self.address.vlc_port

    @property
    def vm_platform(self) -> str:
        if self._platform is None:
            self._platform = str(self.controller.get_vm_platform())
        return self._platform

    # Some getters read these DesktopEnv attributes.
    current_use_proxy = False
