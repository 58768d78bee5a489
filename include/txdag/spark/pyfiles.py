"""The zip that Spark executors without txdag need: txdag and redis-py, for ``spark.submit.pyFiles`` (pyspark-free).

A job's executors run only the functions it sends them (the staging writes of ``txdag.spark.stage``, the outputs'
encoders, the stateful and Trident steps), and those import txdag's modules and redis-py by name. Both are pure
Python, so they travel in a zip that Spark puts on the executors' ``sys.path`` (Spark's "Python Package
Management": ``--py-files``). What cannot travel that way is compiled code: pyarrow must be installed in the
executors' Python (its own ``mapInArrow`` needs it), and pyspark comes from the workers' Spark. Below Python 3.11.3,
redis-py also imports async_timeout, which goes into the zip then.

The zip is deterministic (sorted entries, fixed timestamps): the same code gives the same bytes, so a Spark
Connect session can be keyed by its digest (txdag.spark.connect).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from txdag.errors import ConfigError

PACKAGES = ("txdag", "redis")
ASYNC_TIMEOUT_BELOW = (3, 11, 3)  # redis-py imports async_timeout on older Pythons
STAMP = (1980, 1, 1, 0, 0, 0)  # the zip format's earliest time: no build time in the bytes


@dataclass(frozen=True)
class PyFiles:
    """What ``build`` wrote: the zip, the files per top-level package, its size."""

    path: Path
    files: dict[str, int]
    size: int


@dataclass(frozen=True)
class ExecutorPython:
    """The executors' Python as ``probe`` found it: its version and the pyarrow it has (None: none)."""

    path: str
    version: tuple[int, int, int]
    pyarrow: str | None


PROBE = ("import sys\ntry:\n    import pyarrow\n    arrow = pyarrow.__version__\nexcept ImportError:\n    arrow = ''\n"
         "print(*sys.version_info[:3], arrow)")


def probe(python: str) -> ExecutorPython:
    """Run ``python`` once to learn its version and pyarrow; a Python that does not run is a ConfigError."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise ConfigError(f"the executors' Python {python!r} does not run ({exc}); give the path of the Python "
                          f"that the Spark workers start (spark.pyspark.python)") from None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) not in (3, 4) or not all(w.isdigit() for w in words[:3]):
        said = (done.stderr or done.stdout).strip()[-300:]
        raise ConfigError(f"{python!r} did not answer as a Python does ({said!r}); give the path of the Python that "
                          f"the Spark workers start (spark.pyspark.python)")
    version = (int(words[0]), int(words[1]), int(words[2]))
    return ExecutorPython(python, version, words[3] if len(words) == 4 else None)


def check(executor: ExecutorPython) -> None:
    """Refuse an executors' Python the job cannot run on: another major.minor than this one (PySpark refuses a
    driver and workers that differ there), or one without pyarrow."""
    ours = sys.version_info[:2]
    if executor.version[:2] != ours:
        raise ConfigError(f"the executors' Python {executor.path} is {'.'.join(map(str, executor.version))} and "
                          f"this one is {ours[0]}.{ours[1]}: PySpark needs the same major.minor on the driver and "
                          f"the executors; give the workers a Python {ours[0]}.{ours[1]}")
    if executor.pyarrow is None:
        import pyarrow  # the driver's: the version to install there

        raise ConfigError(f"the executors' Python {executor.path} has no pyarrow (Spark's mapInArrow needs it on "
                          f"every executor, and compiled code cannot travel in a zip): run "
                          f"`{executor.path} -m pip install pyarrow=={pyarrow.__version__}` on every worker")


def build(out: Path, executor: ExecutorPython | None = None) -> PyFiles:
    """Write the zip of txdag and redis-py (and async_timeout when ``executor`` needs it) to ``out``."""
    packages = list(PACKAGES)
    if executor is not None:
        check(executor)
        if executor.version < ASYNC_TIMEOUT_BELOW:
            packages.append("async_timeout")
    entries: dict[str, Path] = {}
    files: dict[str, int] = {}
    for name in packages:
        found = _package_files(name)
        files[name] = len(found)
        entries.update(found)
    if out.is_dir():
        raise ConfigError(f"{out} is a folder: give the zip's file name, e.g. {out / 'txdag-pyfiles.zip'}")
    if out.suffix.lower() != ".zip":  # PySpark puts a pyFiles entry on the executors' path by its name's end
        raise ConfigError(f"{out} does not end in .zip: Spark ships it but puts only .zip, .egg and .jar files on "
                          f"the executors' Python path; name it e.g. {out.with_suffix('.zip')}")
    # Written beside, then renamed over the old zip: a job that reads the zip meanwhile (spark-submit puts it on
    # the driver's path too) sees the old one or the new one, never half of one.
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for arcname in sorted(entries):
                info = zipfile.ZipInfo(arcname, STAMP)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, entries[arcname].read_bytes())
        os.replace(partial, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"cannot write {out} ({exc.strerror or exc}): give a path this user may write") from None
    return PyFiles(out, files, out.stat().st_size)


def _package_files(name: str) -> dict[str, Path]:
    """The package's source files by their path in the zip; a compiled module is refused."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise ConfigError(f"{name} is not installed here, and the executors' Python needs it: run `"
                          f"{sys.executable} -m pip install {name.replace('_', '-')}`, then build the zip again"
                          ) from None
    origin = Path(module.__file__ or "")
    root = origin.parent if origin.name == "__init__.py" else origin
    base = root.parent
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    found = {}
    for path in paths:
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        if path.suffix in (".so", ".pyd"):
            raise ConfigError(f"{name} has compiled code ({path.name}): it cannot travel in a zip; install it in "
                              f"the executors' Python instead")
        found[path.relative_to(base).as_posix()] = path
    return found
