"""Every script in bench/ compiles and answers --help: a benchmark that cannot start is found here, not by a user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "soak_worker.py")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_session_soak_reads_the_heap_in_use_and_the_growth_per_txid():
    before = list(sys.path)
    try:
        sys.path.insert(0, str(BENCH))
        import session_soak
    finally:
        sys.path[:] = before
    info = (" garbage-first heap   total 286720K, used 83656K [0x00000000c0000000, 0x0000000100000000)\n"
            "  region size 1024K, 0 young (0K), 0 survivors (0K)\n Metaspace       used 175749K, committed 178240K")
    assert session_soak.heap_used(info) == 83656 / 1024
    assert session_soak.heap_used("jcmd: no such process") is None
    assert session_soak.heap_used(" def new generation   total 4928K, used 0K") is None  # Serial GC: not the heap
    assert session_soak.slope([(10, 100.0), (20, 101.0), (30, 102.0)]) == pytest.approx(0.1)
    assert session_soak.slope([(10, 100.0)]) == 0.0
