"""A waiting task looks at the Airflow run of the txid it waits on, so that no wait outlives what it waits for.

A wait (deferred or rescheduled) holds no worker and no pool slot, but it holds one of the DAG's run slots
(``max_active_runs``). Two things could then stop the topology for good, both seen on main:

- **the awaited run is queued** behind ``max_active_runs``, after a replay cleared it, while waiting runs hold every
  slot: a coordinate that has no txid yet (it waits for a place among ``max_active_transactions``) gives its slot up:
  it is skipped and consumes no txid, and the replay's run starts in its place;
- **the awaited run failed** in Airflow while ZooKeeper still has its txid in flight: its failure callback could
  not record the failure (the service that was down made the task fail, and the callback too). The waiting task
  records it now, naming why, so that Airflow and ZooKeeper agree: the cascade and the ways out follow as for any
  failed txid, and automatic or manual replays work again;
- **a failed txid's run is queued or running again**: it is being replayed (``txdag replay``, the UI's *Clear*),
  so a new run is not refused (red) for it: it is skipped and consumes no txid.
"""

from __future__ import annotations

import logging
from typing import Any

from txdag.protocol import Runtime, steps
from txdag.zk.records import IN_FLIGHT, TxStatus

log = logging.getLogger("txdag.airflow")


def run_state(context: Any, dag_id: str, run_id: str) -> str | None:
    """The Airflow state of run ``run_id`` (queued, running, success, failed), None when it cannot be read. The
    Task SDK answers a ``DagRunState`` (a str enum, whose str() is its name, not its value)."""
    try:
        state = context["ti"].get_dagrun_state(dag_id, run_id)
        return str(getattr(state, "value", state))
    except Exception as exc:  # noqa: BLE001 - unknown: the task keeps waiting, as it did before it looked
        log.warning("dag=%s run=%s: its state cannot be read (%s: %s)", dag_id, run_id, type(exc).__name__, exc)
        return None


def look_at(rt: Runtime, context: Any, dag_id: str, txid: int) -> tuple[str, str] | None:
    """(run id, Airflow state) of the run of uncommitted ``txid``; records the txid as failed when ZooKeeper has it
    in flight and its run has failed (its callback could not). None when it is committed or unknown, or its run's
    state cannot be read."""
    got = rt.coordinator.store.read_txid(txid)
    if got is None or got[0].status is TxStatus.COMMITTED:
        return None
    record = got[0]
    state = run_state(context, dag_id, record.run_id)
    if state is None:
        return None
    if state == "failed" and record.status in IN_FLIGHT:
        why = (f"its run {record.run_id!r} failed in Airflow while ZooKeeper still had txid {txid} "
               f"{record.status.value} (attempt {record.attempt}): the failure callback could not record it then")
        outcome = steps.fail(rt, record.run_id, why, attempt=record.attempt)
        log.warning("topology=%s txid=%s attempt=%s: recorded as failed now: %s; %s", rt.coordinator.name, txid,
                    record.attempt, why, outcome)
    return record.run_id, state
