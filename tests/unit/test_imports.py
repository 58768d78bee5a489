"""Everything that ships or is run imports: every module of the txdag package, every DAG file, every Spark job,
every benchmark script (issue 15: ``txdag.airflow.demo`` imported names that had moved, and nothing imported it).

One test per module, named after it, so a failure says which file is broken. Importing touches no service:
Airflow gets a throwaway AIRFLOW_HOME (the ``airflow_home`` fixture: Airflow reads it once, at import, and
creates ``logs/`` there), the DAG files get no AIRFLOW_CONN_* variable at all (rendering a DAG looks up no
connection: the coordinate task and ``txdag doctor`` do). The Spark jobs and the benchmark scripts are imported
as modules, which runs nothing because each one guards its ``main()`` with ``if __name__ == "__main__":``;
that guard is checked first (statically), so a script without it fails before it could run at import.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path

import pytest

import txdag

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "include" / "txdag"
BENCH = ROOT / "bench"

pytestmark = pytest.mark.usefixtures("airflow_home")


def txdag_modules() -> list[str]:
    """Every module and package under txdag, found like ``pkgutil.walk_packages(txdag.__path__)`` does but
    without importing the packages while collecting (walk_packages imports each package to look inside it,
    which would import Airflow before the throwaway AIRFLOW_HOME is set, and hide a package that fails)."""
    names: list[str] = []

    def walk(path: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(path, prefix):
            names.append(info.name)
            if info.ispkg:
                walk([str(Path(info.module_finder.path) / info.name.rsplit(".", 1)[-1])], f"{info.name}.")

    walk(list(txdag.__path__), "txdag.")
    return sorted(names)


MODULES = txdag_modules()


def test_the_walk_finds_every_python_file_of_the_package() -> None:
    """A .py file the walk misses would never be imported here (e.g. a folder without __init__.py: setuptools
    would not ship it either)."""
    files = {
        ".".join(("txdag", *p.relative_to(PACKAGE_DIR).with_suffix("").parts)).removesuffix(".__init__")
        for p in PACKAGE_DIR.rglob("*.py")
    }
    assert files == set(MODULES) | {"txdag"}
    assert "txdag.protocol.steps" in MODULES and "txdag.cli.main" in MODULES and len(MODULES) > 50


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)


def load_file(path: Path, name: str, extra_path: Path | None = None) -> None:
    """Import the file at ``path`` as module ``name`` (not ``__main__``), with ``extra_path`` first on sys.path."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    if extra_path is not None:
        sys.path.insert(0, str(extra_path))
    sys.modules[name] = module  # as an import does (dataclasses look their module up there)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved  # bench/soak.py adds bench/ itself
        del sys.modules[name]


def has_main_guard(path: Path) -> bool:
    """The file has a module-level ``if __name__ == "__main__":``."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            test = node.test
            names = [test.left, *test.comparators]
            if (any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)
                    and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names)):
                return True
    return False


def top_level_runs(path: Path) -> list[str]:
    """Module-level statements outside any ``if``, ``def`` or ``class`` that would run the script: a call of a
    function the file defines (``main()``, ``main(process)``), ``sys.exit(...)``, ``raise SystemExit``."""
    tree = ast.parse(path.read_text(), str(path))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)} | {"main"}
    runs = []
    for node in tree.body:
        if isinstance(node, ast.If | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.Raise) and "SystemExit" in ast.unparse(node):
            runs.append(ast.unparse(node))
        calls = (n for n in ast.walk(node) if isinstance(n, ast.Call))
        runs += [ast.unparse(c) for c in calls if ast.unparse(c.func) in {*defined, "sys.exit", "exit"}]
    return runs


# --- DAG files ----------------------------------------------------------------------------------------------

DAG_FILES = sorted((ROOT / "dags").glob("*.py")) + sorted((ROOT / "dags_warm").glob("*.py"))


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_dag_file_imports(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("AIRFLOW_CONN_")]:
        monkeypatch.delenv(name)  # parsing must not need a connection
    monkeypatch.chdir(path.parent)  # a relative job path must not depend on where the DAG processor runs
    load_file(path, f"_txdag_import_check.{path.parent.name}.{path.stem}")


# --- Spark jobs ---------------------------------------------------------------------------------------------

SPARK_JOBS = sorted((ROOT / "spark_jobs").glob("*.py"))


@pytest.mark.parametrize("path", SPARK_JOBS, ids=lambda p: f"spark_jobs/{p.name}")
def test_spark_job_guards_main_and_imports(path: Path) -> None:
    assert has_main_guard(path), f"{path.name}: call main(process) under `if __name__ == \"__main__\":`"
    assert top_level_runs(path) == [], f"{path.name} runs at import"
    load_file(path, f"_txdag_import_check.spark_jobs.{path.stem}")


# --- bench/ -------------------------------------------------------------------------------------------------

BENCH_SCRIPTS = sorted(BENCH.glob("*.py"))
BENCH_MODULES = sorted(BENCH.glob("*/*.py"))  # bench/tput/: the parts of throughput.py


@pytest.mark.parametrize("path", BENCH_SCRIPTS, ids=lambda p: f"bench/{p.name}")
def test_bench_script_guards_main_and_imports(path: Path) -> None:
    assert has_main_guard(path), f"bench/{path.name}: run main() under `if __name__ == \"__main__\":`"
    assert top_level_runs(path) == [], f"bench/{path.name} runs at import"
    load_file(path, f"_txdag_import_check.bench.{path.stem}", extra_path=BENCH)


@pytest.mark.parametrize("path", BENCH_MODULES, ids=lambda p: f"bench/{p.parent.name}/{p.name}")
def test_bench_module_imports(path: Path) -> None:
    name = ".".join((path.parent.name, path.stem)).removesuffix(".__init__")
    sys.path.insert(0, str(BENCH))
    try:
        importlib.import_module(name)  # as throughput.py imports it: `from tput import ...`
    finally:
        sys.path.remove(str(BENCH))


# --- scripts/: the demo drivers that scripts/demo.sh runs ----------------------------------------------------

DEMO_SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


@pytest.mark.parametrize("path", DEMO_SCRIPTS, ids=lambda p: f"scripts/{p.name}")
def test_script_guards_main_and_imports(path: Path) -> None:
    assert has_main_guard(path), f"scripts/{path.name}: run main() under `if __name__ == \"__main__\":`"
    assert top_level_runs(path) == [], f"scripts/{path.name} runs at import"
    load_file(path, f"_txdag_import_check.scripts.{path.stem}")


def test_the_lists_are_not_empty() -> None:
    """A moved folder would silently parametrize nothing."""
    assert len(DEMO_SCRIPTS) >= 2
    assert len(DAG_FILES) >= 4 and len(SPARK_JOBS) >= 4 and len(BENCH_SCRIPTS) >= 5 and len(BENCH_MODULES) >= 5
