"""The per-txid steps are the core: importing them (and the in-process runner and the soak's worker, which run
them) loads neither Airflow nor Spark, so they run and are tested without either."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


@pytest.mark.parametrize("module", ["txdag.protocol", "txdag.local", "soak_worker"])
def test_the_steps_import_neither_airflow_nor_spark(module: str) -> None:
    code = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import {module}; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'pyspark'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"{module} loads {done.stdout.strip()}"
