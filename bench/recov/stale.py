"""The paused task's second half: once Airflow gave up on the frozen try and its retry committed the txid, let the
stale try run on, and record what it did: its txid's record in ZooKeeper must not change, nor the counts (the trial
checks them), and it must leave no staging or claim behind (the trial lists the leftovers)."""

from __future__ import annotations

import signal
import time

from recov import procs
from recov.lab import patiently

STALE_RUN_SECONDS = 60  # how long the resumed task and its Spark job get before the supervisor is resumed too
RETRY_TIMEOUT = 900


def resume_and_watch(hit, worker: int, tree: list[int], t0: float) -> str:  # type: ignore[no-untyped-def]
    lab, topo, txid = hit.lab, hit.topo, hit.txid
    deadline = time.monotonic() + RETRY_TIMEOUT
    while lab.commit_times(topo, [txid])[txid] is None:
        if time.monotonic() > deadline or lab.failed_txids(topo):
            procs.signal_all([worker, *tree], signal.SIGCONT)
            return f"txid {txid} not committed by a retry within {RETRY_TIMEOUT} s of the pause; resumed"
        time.sleep(0.5)
    committed_after = time.time() - t0
    before = _record(lab, topo, txid)
    procs.signal_all(tree, signal.SIGCONT)  # the task and its Spark job first: the stale attempt's writes
    resumed = time.monotonic()
    while procs.alive(hit.task_pid) and procs.spark_drivers(hit.task_pid) and time.monotonic() - resumed < \
            STALE_RUN_SECONDS:
        time.sleep(0.5)
    job_ran = time.monotonic() - resumed
    procs.signal_all([worker], signal.SIGCONT)
    while procs.alive(hit.task_pid) and time.monotonic() - resumed < STALE_RUN_SECONDS + 60:
        time.sleep(0.5)
    gone = not procs.alive(hit.task_pid)
    after = _record(lab, topo, txid)
    log = _stale_log(hit)
    return (f"retry committed txid {txid} {committed_after:.0f} s after SIGSTOP; SIGCONT: the stale job ran "
            f"{job_ran:.0f} s more, the stale task {'exited' if gone else 'still runs'} "
            f"{time.monotonic() - resumed:.0f} s after; txid {txid}'s record "
            f"{'unchanged' if before == after else f'CHANGED: {before} -> {after}'}; stale try's log: {log}")


def _record(lab, topo, txid: int) -> tuple:  # type: ignore[no-untyped-def]
    rec = patiently("reading a txid", lambda: lab.store(topo).read_txid(txid))
    r = rec[0] if rec else None
    return (r.attempt, r.status.value, len(r.history), r.updated_at) if r else ()


def _stale_log(hit) -> str:  # type: ignore[no-untyped-def]
    """The last txdag line of the frozen try's log (try 1 of the task), or why there is none."""
    try:
        text = hit.lab.api.task_log(hit.topo.dag, hit.run_id, hit.task, 1)
    except Exception as exc:  # noqa: BLE001 - the log is a note, not a figure
        return f"(no log: {exc})"
    lines = [line for line in text.splitlines() if "topology=" in line or "Superseded" in line or "moved on" in line]
    return lines[-1][-300:] if lines else "(no txdag line)"
