"""Driving an e2e topology through the REST API and checking its transactions in ZooKeeper (test_topologies,
test_warm_spark)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from conftest import AirflowInstance

from txdag.airflow.api import unique_run_id
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

RUN_TIMEOUT = 600


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_runs(airflow: AirflowInstance, dag_id: str, run_ids: list[str]) -> None:
    states = {run: airflow.api.wait_run(dag_id, run, timeout=RUN_TIMEOUT) for run in run_ids}
    assert set(states.values()) == {"success"}, states


def settle(airflow: AirflowInstance, dag_id: str) -> list[dict]:
    """Wait until every run of ``dag_id`` has finished; returns them all."""
    while True:
        runs = airflow.api.runs(dag_id)
        busy = [r["dag_run_id"] for r in runs if r["state"] not in ("success", "failed")]
        if runs and not busy:
            return runs
        if busy:
            airflow.api.wait_run(dag_id, busy[0], timeout=RUN_TIMEOUT)
        else:
            time.sleep(1)  # no run yet: the scheduler is about to create the first scheduled one


def trigger_until_drained(airflow: AirflowInstance, dag_id: str, at_once: int) -> list[str]:
    """Trigger ``at_once`` runs at a time (past logical dates growing with each trigger) until one is skipped."""
    triggered: list[str] = []
    base = datetime.now(UTC) - timedelta(minutes=5)
    while True:
        batch = [airflow.api.trigger(dag_id, logical_date=base + timedelta(seconds=len(triggered) + i),
                                     run_id=unique_run_id(dag_id)) for i in range(at_once)]
        triggered += batch
        wait_runs(airflow, dag_id, batch)
        coordinates = [airflow.api.task_instance(dag_id, run, "coordinate")["state"] for run in batch]
        if "skipped" in coordinates or len(triggered) > 20:
            return triggered


def check_commits(store: TransactionStore, expected_last: int) -> dict[int, object]:
    """Committed up to the last txid, every txid COMMITTED, first commits in strictly increasing txid order."""
    topo, _ = store.read_topology()
    assert (topo.last_txid, topo.committed_txid) == (expected_last, expected_last)
    records = {t: r for t, (r, _) in store.read_txids(range(1, expected_last + 1)).items()}
    assert sorted(records) == list(range(1, expected_last + 1)), "a txid has no record: a gap"
    assert all(r.status is TxStatus.COMMITTED for r in records.values())
    committed_at = [min(h.at for h in records[t].history if h.status is TxStatus.COMMITTED) for t in sorted(records)]
    assert committed_at == sorted(committed_at) and len(set(committed_at)) == len(committed_at), committed_at
    return records


def process_intervals(airflow: AirflowInstance, dag_id: str, runs: list[str]) -> list[tuple[str, datetime, datetime]]:
    """When each run's process task ran: every try of it (a try that crashed mid-job was processing too), by run."""
    return [(run, _dt(ti["start_date"]), _dt(ti["end_date"])) for run in runs
            for ti in airflow.api.task_tries(dag_id, run, "process") if ti["start_date"] and ti["end_date"]]


def overlapped(intervals: list[tuple[str, datetime, datetime]]) -> bool:
    """Two runs (two txids) processed at the same time."""
    return any(a[0] != b[0] and a[1] < b[2] and b[1] < a[2] for i, a in enumerate(intervals) for b in intervals[i + 1:])


def run_of_txid(records: dict, txid: int) -> str:
    return records[txid].run_id
