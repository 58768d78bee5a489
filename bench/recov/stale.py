"""The paused task's second half: once Airflow gave up on the frozen try and its retry re-emitted the txid (``early``)
or committed it, let the stale try run on and record what it did. Its txid's record must not change (once
committed), the txid must never be failed by it, the counts stay exact (the trial checks them), and it must leave no
staging or claim behind (the trial lists the leftovers)."""

from __future__ import annotations

import signal
import time

from recov import procs
from recov.lab import Hit, Lab, Topology, patiently
from txdag.zk.records import TxStatus

STALE_RUN_SECONDS = 120  # how long the resumed task and its Spark job get before the supervisor is resumed too
RETRY_TIMEOUT = 900


def resume_and_watch(hit: Hit, worker: int, tree: list[int], t0: float, *, early: bool) -> str:
    lab, topo, txid = hit.lab, hit.topo, hit.txid
    if not _wait_for_the_retry(lab, topo, txid, early):
        procs.signal_all([worker, *tree], signal.SIGCONT)
        return f"txid {txid} not {'re-emitted' if early else 'committed'} by a retry within {RETRY_TIMEOUT} s; resumed"
    waited = time.time() - t0
    before = _record(lab, topo, txid)
    procs.signal_all(tree, signal.SIGCONT)  # the task and its Spark job first: the stale attempt's writes
    resumed = time.monotonic()
    while procs.alive(hit.task_pid) and procs.spark_drivers(hit.task_pid) and \
            time.monotonic() - resumed < STALE_RUN_SECONDS:
        time.sleep(0.5)
    job_ran = time.monotonic() - resumed
    time.sleep(5)  # the stale task's own ending (mark_processed, its failure callback) before its supervisor wakes
    procs.signal_all([worker], signal.SIGCONT)
    while procs.alive(hit.task_pid) and time.monotonic() - resumed < STALE_RUN_SECONDS + 60:
        time.sleep(0.5)
    gone = not procs.alive(hit.task_pid)
    after = _record(lab, topo, txid)
    when = "re-emitted it" if early else "committed it"
    changed = "unchanged" if before == after else f"CHANGED: {before} -> {after}"
    failed = _ever_failed(lab, topo, txid)
    return (f"the retry {when} {waited:.0f} s after SIGSTOP; SIGCONT: the stale job ran {job_ran:.0f} s more, the "
            f"stale task {'exited' if gone else 'still runs'} {time.monotonic() - resumed:.0f} s after; txid {txid}"
            f"'s record {'(the retry goes on)' if early else changed}; failed by anyone: {failed}"
            f"; stale try's log: {_stale_log(hit)}")


def _wait_for_the_retry(lab: Lab, topo: Topology, txid: int, early: bool) -> bool:
    deadline = time.monotonic() + RETRY_TIMEOUT
    while time.monotonic() < deadline and not lab.failed_txids(topo):
        rec = patiently("reading a txid", lambda: lab.store(topo).read_txid(txid))[0]
        if rec.status is TxStatus.COMMITTED or (early and rec.attempt > 1 and rec.status is TxStatus.EMITTED):
            return True
        time.sleep(0.5)
    return False


def _record(lab: Lab, topo: Topology, txid: int) -> tuple:
    rec = patiently("reading a txid", lambda: lab.store(topo).read_txid(txid))
    r = rec[0] if rec else None
    return (r.attempt, r.status.value, len(r.history), r.updated_at) if r else ()


def _ever_failed(lab: Lab, topo: Topology, txid: int) -> str:
    rec = patiently("reading a txid", lambda: lab.store(topo).read_txid(txid))[0]
    failed = [h for h in rec.history if h.status is TxStatus.FAILED]
    return f"YES ({failed[0].error})" if failed else "no"


def _stale_log(hit: Hit) -> str:
    """The frozen try's own answer in its log (try 1 of the task): its ``txdag job failed:`` line, else its last txdag
    line, or why there is none."""
    try:
        text = hit.lab.api.task_log(hit.topo.dag, hit.run_id, hit.task, 1)
    except Exception as exc:  # noqa: BLE001 - the log is a note, not a figure
        return f"(no log: {exc})"
    if "txdag job failed:" in text:
        return text[text.rindex("txdag job failed:"):][:300]
    lines = [line for line in text.splitlines() if "topology=" in line]
    return lines[-1][-300:] if lines else "(no txdag line)"
