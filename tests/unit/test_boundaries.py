"""The boundaries of issue 16, kept by tools rather than by a sentence: import-linter's contracts and mypy, both
configured in pyproject.toml, run here as CI runs the unit tier.

Each tool has a list of today's exceptions (the contracts' ``ignore_imports``, mypy's ``ignore_errors`` modules).
Those lists only shrink: a new violation fails the tool's test (it is not on the list), and an entry whose
violation is gone fails the tests below until it is removed. The layers name packages: every module sits in the
layer of its package, so a new module takes its package's layer, and a new package or top-level module must be
placed before it can be imported by anything.

The lists of 2026-11 are frozen below as well (TODAY_*): an entry can leave them, none can join without
changing this file too, in plain sight of the review.

Timing: import-linter takes well under a second per run. mypy with a cold cache (a fresh clone) is the slow
part: about 15 s of CPU for the whole file (some 30 s of wall time on a busy 2-core machine); with .mypy_cache
a rerun takes about 5 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "include" / "txdag"
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
LINTER = CONFIG["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in LINTER["contracts"]}
MYPY = CONFIG["tool"]["mypy"]
EXEMPT_OVERRIDES = [o for o in MYPY["overrides"] if o.get("ignore_errors")]
EXEMPT = EXEMPT_OVERRIDES[0]["module"] if EXEMPT_OVERRIDES else []
# Packages whose own __init__ cannot sit in one layer: the root, whose children are split between layers (its
# __init__ imports only the public names of the root).
SPLIT_PACKAGES = {"txdag"}
# The exceptions when the tools came in (issue 16): the lists in pyproject.toml may only lose entries.
TODAY_IGNORED_IMPORTS = {
    "core": {"txdag.commit.apply -> pyspark", "txdag.topology.jobfile -> pyspark"},
}
TODAY_MYPY_EXEMPT = {
    "txdag.commit.rejections", "txdag.staging.store", "txdag.state.kv.protocol", "txdag.state.kv.state",
    "txdag.windows.store",
}


def run(*command: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a tool of this venv at the repository root, with the work tree's package first on the path (so that
    the sources are checked, not an installed copy)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([str(c) for c in command], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def lint_imports(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run(Path(sys.executable).parent / "lint-imports", "--no-cache", *args)


def mypy(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "mypy", *args)


def toml_value(value: Any) -> str:
    """A TOML value of the few types the configs here use (a JSON string is a TOML basic string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def toml_tables(name: str, tables: list[dict[str, Any]], *, array: bool) -> str:
    header = f"[[{name}]]" if array else f"[{name}]"
    return "".join(f"{header}\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in t.items()) + "\n" for t in tables)


def package_modules() -> set[str]:
    return {".".join(("txdag", *p.relative_to(PACKAGE_DIR).with_suffix("").parts)).removesuffix(".__init__")
            for p in PACKAGE_DIR.rglob("*.py")}


def layers() -> list[list[str]]:
    """The layers contract's modules, top layer first."""
    return [[m.strip() for m in re.split(r"[:|]", layer)] for layer in CONTRACTS["layers"]["layers"]]


def within(module: str, entries: list[str]) -> list[str]:
    return [e for e in entries if module == e or module.startswith(e + ".")]


# --- import-linter --------------------------------------------------------------------------------------------


def test_import_contracts_are_kept() -> None:
    """The core imports neither Airflow nor Spark, the layers go one way, no cycles; an ignore_imports entry that
    matches no import is an error too (unmatched_ignore_imports_alerting)."""
    result = lint_imports()
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout, result.stdout


def test_contracts_report_ignores_that_match_nothing() -> None:
    assert {c.get("unmatched_ignore_imports_alerting") for c in CONTRACTS.values()} == {"error"}


def test_the_exception_lists_only_shrink() -> None:
    added = {cid: sorted(set(c.get("ignore_imports", [])) - TODAY_IGNORED_IMPORTS.get(cid, set()))
             for cid, c in CONTRACTS.items()}
    assert {cid: a for cid, a in added.items() if a} == {}, (
        "new ignore_imports entries: fix the import instead (the contracts' lists only shrink)")
    assert sorted(set(EXEMPT) - TODAY_MYPY_EXEMPT) == [], (
        "new modules exempt from mypy: fix their errors instead (the list only shrinks)")


def test_every_module_sits_in_one_layer_and_the_core_is_every_layer_below_the_edges() -> None:
    every = [m for layer in layers() for m in layer]
    assert len(every) == len(set(every)), "a module is listed in two layers"
    assert all(e.count(".") == 1 for e in every), (
        f"the layers name txdag's packages and top-level modules, not modules inside a package (a package sits in "
        f"one layer whole): {[e for e in every if e.count('.') != 1]}")
    placed = {m: within(m, every) for m in package_modules() - SPLIT_PACKAGES}
    misplaced = {m: e for m, e in sorted(placed.items()) if len(e) != 1}
    assert misplaced == {}, (
        f"each module of txdag must be in exactly one layer of [tool.importlinter] contract 'layers' (a new "
        f"package or top-level module: add it to the layer it belongs to); module -> the entries that hold it: "
        f"{misplaced}")
    assert sorted(CONTRACTS["core"]["source_modules"]) == sorted(m for layer in layers()[1:] for m in layer)


EXECUTOR_IMPORTS = ("txdag", "txdag.topology.topology", "txdag.spark.batch", "txdag.spark.stage", "txdag.spouts")


def test_what_the_spark_executors_import_needs_no_kazoo(tmp_path) -> None:
    """A cluster's executors get txdag as a zip (`txdag pyfiles`), without kazoo: the package root and what a job's
    tasks unpickle must import without it (the cluster tier once caught the root importing ZooKeeper's client)."""
    code = f"import sys\nsys.modules['kazoo'] = None\nimport {', '.join(EXECUTOR_IMPORTS)}\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


def test_only_txdag_zk_may_import_kazoo() -> None:
    """The kazoo contract lists every child of txdag but txdag.zk: a new module or package is covered at once."""
    children = {m.split(".")[1] for m in package_modules() if m != "txdag"}
    assert sorted(CONTRACTS["kazoo"]["source_modules"]) == sorted(f"txdag.{c}" for c in children - {"zk"})
    assert CONTRACTS["kazoo"]["forbidden_modules"] == ["kazoo"] and not CONTRACTS["kazoo"].get("ignore_imports")


IGNORED = [(cid, entry) for cid, c in CONTRACTS.items() for entry in c.get("ignore_imports", [])]


@pytest.mark.parametrize(("contract", "entry"), IGNORED, ids=[f"{c}:{e}" for c, e in IGNORED])
def test_each_ignored_import_is_still_needed(contract: str, entry: str, tmp_path: Path) -> None:
    """Without the entry its contract breaks: a violation fixed some other way must leave the list."""
    options = dict(CONTRACTS[contract], ignore_imports=[e for e in CONTRACTS[contract]["ignore_imports"]
                                                         if e != entry],
                   unmatched_ignore_imports_alerting="none")  # an unmatched entry fails the test above
    config = tmp_path / "importlinter.toml"
    config.write_text(toml_tables("tool.importlinter", [{k: v for k, v in LINTER.items() if k != "contracts"}],
                                  array=False)
                      + toml_tables("tool.importlinter.contracts", [options], array=True))
    result = lint_imports("--config", config)
    assert result.returncode == 1 and "0 kept, 1 broken" in result.stdout, (
        f"contract {contract!r} is kept without ignoring {entry!r}: remove it from that contract's "
        f"ignore_imports in pyproject.toml\n{result.stdout}\n{result.stderr}")


# --- mypy -----------------------------------------------------------------------------------------------------


def test_mypy_passes() -> None:
    result = mypy()
    assert result.returncode == 0, f"mypy failed (fix the errors; the exemption list takes no new module):\n" \
                                   f"{result.stdout}\n{result.stderr}"


def test_every_module_exempt_from_mypy_still_has_errors(tmp_path: Path) -> None:
    """The same check without the exemptions: each exempt module must still fail, or leave the list."""
    assert EXEMPT and len(EXEMPT_OVERRIDES) == 1
    assert EXEMPT == sorted(EXEMPT), "keep the exempt modules sorted"
    settings = {k: v for k, v in MYPY.items() if k not in ("overrides", "files")}
    overrides = [o for o in MYPY["overrides"] if not o.get("ignore_errors")]
    config = tmp_path / "mypy.toml"
    config.write_text(toml_tables("tool.mypy", [settings], array=False)
                      + toml_tables("tool.mypy.overrides", overrides, array=True))
    result = mypy("--config-file", config, *MYPY["files"])
    errors = re.findall(r"^include/(txdag/\S+)\.py:\d+: error:.*$", result.stdout, re.MULTILINE)
    failing = {path.replace("/", ".").removesuffix(".__init__") for path in errors}
    assert result.returncode == 1 and failing, f"mypy found no errors at all:\n{result.stdout}\n{result.stderr}"
    clean = sorted(set(EXEMPT) - failing)
    assert clean == [], f"{clean} now check clean: remove them from the ignore_errors list of [tool.mypy] in " \
                        f"pyproject.toml"
    # (a new error outside the list fails test_mypy_passes, with mypy's message)
