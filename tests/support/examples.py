"""The examples/ modules as their users' DAG files and jobs import them: a module of their own, loaded from its file,
not from this process's path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_module(name: str) -> ModuleType:
    """examples/<name>.py, imported as the module ``name`` (sys.modules holds it, so Spark and pickles find it)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no example {name!r} in {EXAMPLES}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
