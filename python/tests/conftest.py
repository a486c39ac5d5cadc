"""Shared fixtures: tiny models built once per session into a temporary folder (offline)."""

import os
from pathlib import Path

import pytest

# Everything is local: a hub lookup would hang on a machine without access to it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from dartflow_vlm.build_tiny_model import build


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """seed0, seed0 again (another folder) and seed1."""
    root = tmp_path_factory.mktemp("tiny")
    dirs = {"seed0": root / "a", "seed0_again": root / "b", "seed1": root / "c"}
    build(dirs["seed0"], 0)
    build(dirs["seed0_again"], 0)
    build(dirs["seed1"], 1)
    return dirs
