"""A run queued in Airflow, and which runs hold the DAG's run slots meanwhile: ``txdag status`` and the
transactions page name that wait, since no txid record shows it. Pure: the txid records, the DAG's queued and
running runs as ``{run_id: state}``, its ``max_active_runs`` (the topology's ``max_active_transactions``).

A waiting run (a commit deferred until the txid before it commits, a coordinate deferred until there is a place among
``max_active_transactions``) holds no worker and no pool slot, but it holds a run slot. A replay's run cleared behind
such runs is queued until one of them ends, and the line says which one frees a slot, and how:

- a coordinate with no txid that waits for a place gives its slot up (skipped, no txid consumed) once the run of the
  txid it waits on, the first uncommitted one, is queued (``txdag.airflow.awaited``), at its next look;
- else the holder with the lowest txid frees its slot once its txid commits, unless a txid before it is queued;
- else, when the first uncommitted txid's run is queued behind runs that all wait for it, none frees a slot: said so.
"""

from __future__ import annotations

from typing import Any

from txdag.txid.waits import waits_on
from txdag.zk.records import IN_FLIGHT, TopologyRecord, TxidRecord, TxStatus


def queued_run(run_id: str, record: TxidRecord | None) -> str:
    """A queued run owns a txid only when a replay cleared it: its coordinate allocates a new run's txid."""
    return f"run {run_id} (txid {record.txid}, being replayed)" if record else f"run {run_id} (a new run, no txid yet)"


def holder(run_id: str, record: TxidRecord | None, topo: TopologyRecord, full: bool) -> str:
    """A running run: its txid and what it waits on, or, with no txid yet, whether it waits for a place."""
    if record is None:
        place = ", waiting for a place among max_active_transactions" if full else ""
        return f"run {run_id} (coordinating: no txid yet{place})"
    if record.status in IN_FLIGHT:
        return f"run {run_id} (txid {record.txid}: waits on {waits_on(record, topo.committed_txid)})"
    return f"run {run_id} (txid {record.txid}, being replayed)"


def slot_frees(running: list[str], by_run: dict[str, TxidRecord], topo: TopologyRecord,
               runs: dict[str, str], full: bool) -> str:
    """Which holder frees a slot first, and how (see the module's docstring); a claim only where it holds."""
    by_txid = {r.txid: r for r in by_run.values()}
    head = by_txid.get(topo.committed_txid + 1)
    queued_head = head if head is not None and runs.get(head.run_id) == "queued" else None
    coordinating = [run for run in running if run not in by_run]
    if queued_head and full and coordinating:
        who = " and ".join(f"run {run}" for run in coordinating)
        gives = "gives its slot" if len(coordinating) == 1 else "give their slots"
        return (f"{who} {gives} up (skipped, consuming no txid) at its next look, within the topology's "
                f"commit_poke_interval, because the run of txid {queued_head.txid}, which it waits on, is queued")
    owned = sorted((by_run[run] for run in running if run in by_run), key=lambda r: r.txid)
    queued_before = [t for t in range(topo.committed_txid + 1, owned[0].txid if owned else 0)
                     if t in by_txid and runs.get(by_txid[t].run_id) == "queued"]
    if owned and not queued_before:
        return f"run {owned[0].run_id} frees its slot once txid {owned[0].txid} commits"
    if queued_head and not coordinating and queued_head.status is not TxStatus.FAILED:
        return (f"no holder frees one by itself, as each waits for txid {queued_head.txid} to commit, whose run "
                "is queued behind them")
    return "one frees when one of the holders ends"


def queued_behind(topo: TopologyRecord, records: list[TxidRecord], runs: dict[str, str],
                  max_active_runs: int | None, paused: bool | None = None) -> dict[str, Any] | None:
    """Why the DAG's queued runs have not started, None when none is queued: ``queued`` and ``held_by`` (run ids),
    ``frees`` and the ``text`` status and the page print."""
    queued = sorted(run for run, state in runs.items() if state == "queued")
    running = sorted(run for run, state in runs.items() if state == "running")
    if not queued:
        return None
    by_run = {r.run_id: r for r in records}
    waiting = " and ".join(queued_run(run, by_run.get(run)) for run in queued)
    verb = "is" if len(queued) == 1 else "are"
    found = {"max_active_runs": max_active_runs, "queued": queued, "held_by": running, "frees": None}
    if paused:
        return {**found, "text": f"{waiting} {verb} queued: the DAG is paused, so Airflow starts no run until it is "
                                 "unpaused"}
    if max_active_runs is None or len(running) < max_active_runs:
        return {**found, "text": f"{waiting} {verb} queued with a run slot free ({len(running)} of "
                                 f"{max_active_runs or '?'} held): Airflow's scheduler starts it at its next loop "
                                 "(unless the scheduler is down)"}
    full = topo.last_txid - topo.committed_txid >= max_active_runs
    held = " and ".join(holder(run, by_run.get(run), topo, full) for run in running)
    frees = slot_frees(running, by_run, topo, runs, full)
    return {**found, "frees": frees,
            "text": f"{waiting} {verb} queued behind max_active_runs ({max_active_runs}): the slots are held by "
                    f"{held}. {'It starts' if len(queued) == 1 else 'They start'} when a slot frees: {frees}"}
