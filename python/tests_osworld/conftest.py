from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dartflow_osworld.operations import Settings
from dartflow_osworld.osworld_modules import OsworldModules, load_osworld_modules
from dartflow_osworld.server import Sidecar

from .fake_vm import FakeVm


@pytest.fixture(scope="session")
def mods() -> OsworldModules:
    return load_osworld_modules()


@pytest.fixture
def vm(tmp_path: Path) -> Iterator[FakeVm]:
    root = tmp_path / "vm"
    root.mkdir()
    fake = FakeVm(root)
    yield fake
    fake.close()


@pytest.fixture
def sidecar(mods: OsworldModules, tmp_path: Path) -> Sidecar:
    return Sidecar(mods, tmp_path / "cache", Settings(probe_timeout_s=2.0, retry_interval_s=0.05), token=None)
