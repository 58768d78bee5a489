"""One trial: two new txids in flight, one fault on the first while it is in ``phase``, then the seconds from the
fault to each txid's commit (ZooKeeper's commit times), exactness against the ground truth, txid order, and the
leftovers of a stale attempt. A trial that did not recover by itself within its timeout is repaired (its failed or
stuck txids replayed through the REST API, as ``txdag replay`` does) so that the next trial starts clean."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tput.services import BenchError

from recov import procs
from recov.faults import Fault
from recov.lab import Hit, Lab, Topology, patiently
from txdag.txid.report import replay_targets


@dataclass(frozen=True)
class Plan:
    batch: int
    restart_after: float
    timeout: float  # seconds after the fault for both txids to commit by themselves


def run_trial(lab: Lab, topo: Topology, fault: Fault | None, phase: str, plan: Plan) -> dict[str, Any]:
    name = fault.name if fault else "none"
    print(f"recovery: {topo.variant.mode} {name} during {phase}", flush=True)
    first = lab.committed_txid(topo) + 1
    txids = [first, first + 1]
    lab.append(topo, 2 * plan.batch)
    triggered = time.time()
    runs = lab.trigger(topo, 2)
    run_of = _runs_by_txid(lab, topo, runs, txids)
    hit = _reach(lab, topo, run_of[first], first, phase, plan, on_task=fault.on_task if fault else True)
    t0, note = fault.inject(hit) if fault else (time.time(), "")
    recovered = _wait_commits(lab, topo, txids, t0 + plan.timeout)
    times = lab.commit_times(topo, txids)
    repaired = "" if recovered else _repair(lab, topo, txids, plan.timeout)
    states = _settle(lab, topo, runs)
    row = {
        "mode": topo.variant.mode, "fault": name, "phase": phase, "txids": txids,
        "landed": times[first] is None or times[first] > t0,  # a commit-phase fault may come after the commit
        "in_flight_s": _since(times[first], t0), "next_s": _since(times[first + 1], t0),
        "trigger_to_commit_s": [_since(times[x], triggered) for x in txids],
        "recovered": recovered, "repaired": repaired, "run_states": states,
        "tries": {t: {task: lab.ti(topo, run_of[t], task)["try_number"] for task in ("process", "commit")}
                  for t in txids},
        "exact": lab.check_exact(topo), "order": lab.order_problems(topo),
        "leftovers": lab.leftovers(topo, txids), "note": note,
    }
    print(f"recovery:   -> {row['in_flight_s']} s / {row['next_s']} s, exact {not row['exact']}, "
          f"order {not row['order']}, {note}", flush=True)
    return row


def _since(at: float | None, t0: float) -> float | None:
    return None if at is None else round(at - t0, 1)


def _runs_by_txid(lab: Lab, topo: Topology, runs: list[str], txids: list[int]) -> dict[int, str]:
    deadline = time.monotonic() + 300
    while True:
        found = {lab.txid_of(topo, r): r for r in runs}
        if all(t in found for t in txids):
            return {t: found[t] for t in txids}
        if time.monotonic() > deadline:
            raise BenchError(f"{topo.dag}: runs {runs} got txids {found}, not {txids}, within 300 s")
        time.sleep(0.3)


def _reach(lab: Lab, topo: Topology, run_id: str, txid: int, phase: str, plan: Plan, *, on_task: bool) -> Hit:
    """Waits until txid's ``phase`` task runs (process: its Spark job too, for 2 s) and returns where it runs. A
    fault that is not ``on_task`` hits the commit phase as the process task ends: the commit runs in its wake."""
    deadline = time.monotonic() + 300
    if phase == "commit" and on_task:
        return _reach_commit_task(lab, topo, run_id, txid, plan, deadline)
    while time.monotonic() < deadline:
        if phase == "commit" and not on_task:
            if lab.ti(topo, run_id, "process")["state"] == "success":
                return Hit(lab, topo, run_id, txid, phase, "", 0, plan.restart_after)
            time.sleep(0.1)
            continue
        ti = lab.ti(topo, run_id, phase)
        found = procs.task_process(ti["id"]) if ti["state"] in ("queued", "running") else None
        if found is not None and (topo.variant.mode == "connect" or procs.spark_drivers(found.pid)):
            time.sleep(2.0)
            return Hit(lab, topo, run_id, txid, phase, ti["id"], found.pid, plan.restart_after)
        time.sleep(0.3)
    raise BenchError(f"{topo.dag}: txid {txid}'s {phase} task did not start within 300 s (run {run_id})")


def _reach_commit_task(lab: Lab, topo: Topology, run_id: str, txid: int, plan: Plan, deadline: float) -> Hit:
    """The commit task's process as soon as it exists: a commit takes about a second, shorter than a REST call per
    look. Once the process task is done, it reads the commit's task instance id each second and looks for its
    process in /proc every 20 ms."""
    while lab.ti(topo, run_id, "process")["state"] != "success" and time.monotonic() < deadline:
        time.sleep(0.2)
    while time.monotonic() < deadline:
        ti_id = lab.ti(topo, run_id, "commit")["id"]
        for _ in range(50):
            found = procs.task_process(ti_id)
            if found is not None:
                return Hit(lab, topo, run_id, txid, "commit", ti_id, found.pid, plan.restart_after)
            time.sleep(0.02)
    raise BenchError(f"{topo.dag}: txid {txid}'s commit task did not start within 300 s (run {run_id})")


def _wait_commits(lab: Lab, topo: Topology, txids: list[int], deadline: float, *, replayed: bool = False) -> bool:
    """True once every txid is committed; False at the deadline, or at once when a txid failed (a cascade: it
    waits for a replay) unless it was ``replayed``."""
    while time.time() < deadline:
        times = lab.commit_times(topo, txids)
        if all(times.values()):
            return True
        if not replayed and lab.failed_txids(topo):
            return False
        time.sleep(0.5)
    return False


def _repair(lab: Lab, topo: Topology, txids: list[int], timeout: float) -> str:
    """Replays from the first failed or uncommitted txid (clears their runs), and waits for the commits."""
    failed = lab.failed_txids(topo)
    errors = {t: rec.error for t, (rec, _) in lab.store(topo).read_txids(failed[:1]).items()}
    start = lab.committed_txid(topo) + 1  # a txid may be stuck, unfailed, before the first failed one
    records = patiently("reading txids", lambda: replay_targets(lab.store(topo), start))
    for record in records:
        patiently("clearing a run", lambda r=record: lab.api.clear_run(topo.dag, r.run_id))
    print(f"recovery:   did not recover by itself: replayed from txid {start}", flush=True)
    if not _wait_commits(lab, topo, txids, time.time() + min(timeout, 300), replayed=True):
        raise BenchError(f"{topo.dag}: txids {txids} not committed after a replay from txid {start} either")
    if failed:
        return f"replayed from txid {start} (failed txids {failed}: {errors})"
    return f"replayed stuck txids from {start}"


def _settle(lab: Lab, topo: Topology, runs: list[str]) -> dict[str, str]:
    """Waits (up to 5 min) for the runs to finish and for every process of the trial's tasks to be gone."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        states = {r: lab.run_state(topo, r) for r in runs}
        busy = [p for p in procs.of_home(str(lab.stack.airflow_home)) if "airflow worker -- " in p.cmdline
                and "LocalExecutor" not in p.cmdline]
        drivers = [p for p in procs.table().values() if procs.SPARK_SUBMIT in p.cmdline
                   and f"txdag-{topo.dag}" in p.cmdline]
        if all(s in ("success", "failed") for s in states.values()) and not busy and not drivers:
            return states
        time.sleep(1)
    return {r: lab.run_state(topo, r) for r in runs}
