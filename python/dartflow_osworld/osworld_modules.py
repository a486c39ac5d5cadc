"""Imports OSWorld's setup controller, getters and metric functions from the installed `desktop-env`
package, module by module.

`desktop_env.evaluators.metrics/__init__.py` (and `getters/__init__.py`) import every submodule, and some
of those need torch, easyocr, librosa … which this venv deliberately lacks (infra/install-osworld.sh). So
the two packages are registered as bare package objects pointing at their real folders, and each
submodule is imported on its own: the code that runs is desktop-env's, unchanged, and a submodule that
cannot import only makes its own functions unavailable (reported by name, never a silent 0).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UnsupportedError

_PACKAGES = ("desktop_env.evaluators.metrics", "desktop_env.evaluators.getters")


@dataclass
class OsworldModules:
    version: str
    metrics: dict[str, Callable[..., Any]] = field(default_factory=dict)
    getters: dict[str, Callable[..., Any]] = field(default_factory=dict)
    # module name -> import error, for metric/getter modules that could not be imported
    failed: dict[str, str] = field(default_factory=dict)
    setup_controller: type[Any] | None = None
    python_controller: type[Any] | None = None

    def metric(self, name: str, field_name: str) -> Callable[..., Any]:
        if name == "infeasible":
            raise UnsupportedError("'infeasible' is only valid as the whole evaluator.func", field_name)
        fn = self.metrics.get(name)
        if fn is None:
            raise UnsupportedError(
                f"metric function {name!r} is not available in this sidecar ({self._why()})", field_name
            )
        return fn

    def getter(self, kind: str, field_name: str) -> Callable[..., Any]:
        fn = self.getters.get(f"get_{kind}")
        if fn is None:
            raise UnsupportedError(
                f"getter type {kind!r} (get_{kind}) is not available in this sidecar ({self._why()})",
                field_name,
            )
        return fn

    def _why(self) -> str:
        if not self.failed:
            return "desktop-env has no such function"
        names = ", ".join(f"{m}: {e}" for m, e in sorted(self.failed.items()))
        return f"desktop-env has no such function, or it is in a module that did not import: {names}"


def _bare_package(name: str, folder: Path) -> None:
    if name in sys.modules:
        return
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(folder)]
    pkg.__package__ = name
    sys.modules[name] = pkg


def _exports(init_file: Path) -> dict[str, list[str]]:
    """`from .sub import a, b` lines of a package __init__ → {"sub": ["a", "b"]} (read, not executed)."""
    tree = ast.parse(init_file.read_text(encoding="utf-8"), filename=str(init_file))
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.setdefault(node.module, []).extend(a.asname or a.name for a in node.names)
    return out


def load_osworld_modules() -> OsworldModules:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or spec.origin is None:
        raise RuntimeError("the desktop-env package is not installed: run 'bash infra/install-osworld.sh'")
    from importlib.metadata import version

    root = Path(spec.origin).parent
    mods = OsworldModules(version=version("desktop-env"))
    for pkg in _PACKAGES:
        _bare_package(pkg, root / Path(*pkg.split(".")[1:]))
    for pkg in _PACKAGES:
        folder = root / Path(*pkg.split(".")[1:])
        target = mods.metrics if pkg.endswith("metrics") else mods.getters
        # Exactly the names the package's __init__ exports (what DesktopEnv looks up with getattr).
        for submodule, names in _exports(folder / "__init__.py").items():
            name = f"{pkg}.{submodule}"
            try:
                module = importlib.import_module(name)
            except Exception as err:  # any import failure only disables this module's functions
                mods.failed[name] = f"{type(err).__name__}: {err}"
                continue
            for attr in names:
                value = getattr(module, attr, None)
                if callable(value):
                    target.setdefault(attr, value)
    try:
        mods.setup_controller = importlib.import_module("desktop_env.controllers.setup").SetupController
        mods.python_controller = importlib.import_module("desktop_env.controllers.python").PythonController
    except Exception as err:
        mods.failed["desktop_env.controllers"] = f"{type(err).__name__}: {err}"
    return mods
