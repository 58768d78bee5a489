"""A topology's job file imported as a module: its ``process`` for warm Spark, its aggregators for the commit.

The module gets a name of its own (``txdag_job_<stem>``), so the job's ``if __name__ == "__main__"`` block does not
run. Imported once per process and path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from txdag.errors import ConfigError

PREFIX = "txdag_job_"


def module_name(job_path: str) -> str:
    return PREFIX + Path(job_path).stem


def load_job_module(job_path: str) -> ModuleType:
    """The job file at ``job_path`` as a module (imported on the first call, then reused)."""
    path = Path(job_path)
    name = module_name(job_path)
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    if not path.is_file():
        raise ConfigError(f"Spark job {job_path} is not a local file: warm mode (spark_mode='connect') and commits "
                          f"of custom aggregators import the job file, so it must be readable where the task runs")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _pickle_by_value(module)
    return module


def _pickle_by_value(module: ModuleType) -> None:
    """Classes and functions of the job (a step, an aggregator) then travel to the Spark workers by value: the
    workers cannot import the job file by its module name, as spark-submit's ``__main__`` they never could."""
    try:
        from pyspark import cloudpickle
    except ImportError:  # a commit task without pyspark needs no pickling
        return
    cloudpickle.register_pickle_by_value(module)
