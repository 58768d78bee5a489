"""The fault harness's short schedule (bench/jepsen.py, issue 36 item 5) through the real Airflow path: its own
Redis, ZooKeeper, PostgreSQL, Spark Connect server and Airflow, a producer triggering runs through the REST API,
pauses and kills overlapping on a seeded schedule, then the checker over the recorded history.

It fails on any violation the checker reports (state, coverage, order, double, stale, liveness), and when the
schedule did not hit anything (every fault skipped): a run that injected nothing proves nothing. A failing
schedule's history stays in the output folder (printed) and replays with ``--seed``. The long run (50 schedules
and more) is the bench's, not CI's: ``.venv/bin/python bench/jepsen.py --schedules 50``.

TXDAG_JEPSEN_SEED picks another schedule (default: a fixed one, so that a red run here replays as it ran).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("TXDAG_JEPSEN_SEED", "36003"))  # a schedule that pauses and kills the Connect server
TIMEOUT = 1800


def test_a_short_schedule_of_overlapping_faults_leaves_no_violation() -> None:
    out = REPO / ".run" / "test-logs" / f"jepsen-{SEED}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TXDAG_", "SPARK_"))}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "jepsen.py"), "--schedules", "1", "--duration",
                           "180", "--batch", "50", "--seed", str(SEED), "--out", str(out), "--flush"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    print(done.stdout[-8000:], done.stderr[-4000:])
    summary_file = out / "summary.json"
    assert summary_file.exists(), f"bench/jepsen.py exited {done.returncode} without a summary:\n{done.stderr[-3000:]}"
    summary = json.loads(summary_file.read_text())
    [schedule] = summary["schedules"]
    assert schedule["violations"] == [], f"seed {SEED}: history in {out}/seed-{SEED}.json"
    assert sum(schedule["faults"].values()) >= 2, f"seed {SEED} hit nothing: {schedule}"
    assert schedule["txids"] > 0 and schedule["recovery_s"] is not None, schedule
    assert done.returncode == 0, done.stderr[-3000:]
