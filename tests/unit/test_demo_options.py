"""scripts/demo.sh refuses a wrong option before it installs or starts anything (exit 2, naming the option), and
the Airflow demo refuses a count below 1 (0 runs in flight would wait for ever)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from demo_airflow import positive  # noqa: E402  (scripts/demo_airflow.py, run by scripts/demo.sh)


@pytest.mark.parametrize(("args", "message"), [
    (["--bogus"], "unknown option '--bogus'"),
    (["--tweets"], "--tweets takes a whole number >= 1, got ''"),
    (["--tweets", "0"], "--tweets takes a whole number >= 1, got '0'"),
    (["--at-once", "two"], "--at-once takes a whole number >= 1, got 'two'"),
    (["--in-process", "--at-once", "3"], "--at-once is for the Airflow demo"),
    (["--spark-submit", "--batch-size", "5"], "--batch-size is for --in-process"),
])
def test_a_wrong_option_is_refused_before_anything_runs(args: list[str], message: str) -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh"), *args], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert done.stdout == ""  # no "setup:" or "services:" line: nothing was installed or started


def test_positive_counts() -> None:
    assert positive("3") == 3
    for bad in ("0", "-1", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="a whole number >= 1"):
            positive(bad)


def test_airflow_down_is_one_line_not_a_traceback() -> None:
    import os

    from support.servers import free_port

    env = {**os.environ, "TXDAG_AIRFLOW_URL": f"http://127.0.0.1:{free_port()}", "TXDAG_AIRFLOW_PASSWORD": "x"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_airflow.py")], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "demo: Airflow's REST API at http://127.0.0.1:" in done.stderr and "does not answer" in done.stderr
