"""The fault harness's short schedule (bench/jepsen.py, issue 36 item 5) through the real Airflow path: its own
Redis, ZooKeeper, PostgreSQL, Spark Connect server and Airflow, each in a network namespace of its own, a producer
triggering runs through the REST API, pauses, kills and network cuts overlapping on a seeded schedule, then the
checker over the recorded history.

It fails on any violation the checker reports (state, coverage, order, double, stale, liveness: a drain that needed
a replay through the REST API is one), when the schedule hit fewer than two things, and when a fault was left out
because its target was not the harness's own (a server of an earlier run on its ports). A failing schedule's
history stays in the output folder (printed) and replays with ``--seed``. The long run (50 schedules and more) is
the bench's, not CI's: ``.venv/bin/python bench/jepsen.py --schedules 50``.

TXDAG_JEPSEN_SEED picks another schedule (default: a fixed one, so that a red run here replays as it ran).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# pause-redis, kill-scheduler (down 60 s), a cut Airflow-ZooKeeper, kill-triggerer (down 52 s), kill-task, a one-way
# cut ZooKeeper -> Connect; several at once
SEED = int(os.environ.get("TXDAG_JEPSEN_SEED", "36049"))
DRAIN = 300  # seconds for the backlog to drain by itself after the schedule
TIMEOUT = 3000  # above the harness's worst case: start, 180 s, a drain, a replay, a drain, the settling
GRACE = 300  # seconds for its clean-up after a SIGTERM (servers stopped, namespaces deleted)


def test_a_short_schedule_of_overlapping_faults_leaves_no_violation() -> None:
    out = REPO / ".run" / "test-logs" / f"jepsen-{SEED}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "TXDAG_", "SPARK_"))}
    argv = [sys.executable, str(REPO / "bench" / "jepsen.py"), "--schedules", "1", "--duration", "180", "--batch",
            "50", "--drain", str(DRAIN), "--seed", str(SEED), "--out", str(out), "--flush"]
    with subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as harness:
        try:
            output, _ = harness.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            harness.send_signal(signal.SIGTERM)  # its finally stops what it started; a SIGKILL would leave it all
            output, _ = harness.communicate(timeout=GRACE)
            raise AssertionError(f"bench/jepsen.py seed {SEED} ran past {TIMEOUT} s:\n{output[-6000:]}") from None
    print(output[-12000:])
    summary_file = out / "summary.json"
    assert summary_file.exists(), f"bench/jepsen.py exited {harness.returncode} without a summary:\n{output[-4000:]}"
    summary = json.loads(summary_file.read_text())
    [schedule] = summary["schedules"]
    assert schedule["violations"] == [], f"seed {SEED}: history in {out}/seed-{SEED}.json"
    assert schedule["not_ours"] == [], schedule
    assert sum(schedule["faults"].values()) >= 2, f"seed {SEED} hit fewer than two things: {schedule}"
    assert schedule["txids"] > 0 and schedule["samples"] > 0 and schedule["recovery_s"] is not None, schedule
    assert harness.returncode == 0, output[-4000:]
