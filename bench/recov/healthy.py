"""A healthy drain under the recovery settings: no fault, a backlog of N tweets, two txids in flight. Short timeouts
must not kill healthy tasks: it counts the task tries beyond the first, the scheduler's heartbeat-timeout and
orphan-reset lines, and the tasks Airflow told to stop, and checks the counts exactly."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

from tput.services import BenchError

from recov.lab import Lab, Topology, patiently

FALSE_KILLS = re.compile(r"without heartbeat|Reset the following|SchedulerJob instances as failed|"
                         r"Task did not emit heartbeat|shouldn't be running anymore|Too many failed heartbeats")


def healthy_run(lab: Lab, topo: Topology, tweets: int, timeout: float) -> dict[str, Any]:
    print(f"recovery: healthy drain of {tweets:,} tweets in batches of {topo.variant.batch:,} "
          f"({topo.variant.mode})", flush=True)
    logs = Path(lab.stack.airflow_home)
    offsets = {p: p.stat().st_size for p in logs.glob("*.log")}
    lab.append(topo, tweets)
    txids = math.ceil(tweets / topo.variant.batch)
    first = lab.committed_txid(topo) + 1
    started = time.time()
    runs = lab.trigger(topo, txids)
    deadline = time.monotonic() + timeout
    while lab.committed_txid(topo) < first + txids - 1:
        if lab.failed_txids(topo) or time.monotonic() > deadline:
            raise BenchError(f"{topo.dag}: the healthy drain stopped at txid {lab.committed_txid(topo)} (failed "
                             f"txids {lab.failed_txids(topo)}; timeout {timeout:.0f} s)")
        time.sleep(1)
    seconds = time.time() - started
    for run in runs:
        patiently("waiting for a run", lambda r=run: lab.api.wait_run(topo.dag, r, timeout=300))
    retried = _retried(lab, topo)
    lines = [line for p, start in offsets.items() for line in _tail(p, start) if FALSE_KILLS.search(line)]
    lines += [f"task log {p}: {m.group(0)}" for p in (logs / "logs").rglob("*") if p.is_file() and
              topo.dag in str(p) for m in [FALSE_KILLS.search(p.read_text(errors="replace"))] if m]
    exact, order = lab.check_exact(topo), lab.order_problems(topo)
    summary = (f"{tweets:,} tweets, {txids} txids of {topo.variant.batch:,} ({topo.variant.mode}) in {seconds:.0f} s; "
               f"task tries beyond the first: {len(retried)}; heartbeat-timeout/orphan/kill lines: {len(lines)}; "
               f"exact {'yes' if not exact else 'NO'}; order {'yes' if not order else 'NO'}")
    print(f"recovery: {summary}", flush=True)
    return {"tweets": tweets, "txids": txids, "seconds": round(seconds, 1), "retried": retried,
            "false_kill_lines": lines[:50], "exact": exact, "order": order, "summary": summary}


def _retried(lab: Lab, topo: Topology) -> list[str]:
    """Every task instance of the DAG with a try beyond its first (a reschedule does not count as a try)."""
    found, offset = [], 0
    while True:
        page = patiently("listing task instances", lambda o=offset: lab.api.get(
            f"/dags/{topo.dag}/dagRuns/~/taskInstances", limit=100, offset=o))["task_instances"]
        found += [f"{ti['dag_run_id']}/{ti['task_id']} try {ti['try_number']}" for ti in page
                  if ti["try_number"] > 1]
        if len(page) < 100:
            return found
        offset += 100


def _tail(path: Path, start: int) -> list[str]:
    with path.open("rb") as f:
        f.seek(start)
        return f.read().decode(errors="replace").splitlines()
