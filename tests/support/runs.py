"""What the exactly-once tests of the e2e and cluster tiers do with a topology's runs: trigger them until the source
is drained, then check its txid records in ZooKeeper and read its counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import redis

from txdag.airflow.api import AirflowAPI, unique_run_id
from txdag.zk.records import TxidRecord, TxStatus
from txdag.zk.store import TransactionStore

RUN_TIMEOUT = 600
MAX_RUNS = 20  # a DAG still emitting after this many runs: the caller's checks say why


def drain(api: AirflowAPI, dags: list[str], at_once: int, timeout: float = RUN_TIMEOUT) -> dict[str, list[str]]:
    """Trigger ``at_once`` runs of each DAG at a time (past logical dates growing with each trigger), until a run of
    each finds its source drained (its coordinate skipped); every run must succeed. Returns the runs by DAG."""
    runs: dict[str, list[str]] = {dag: [] for dag in dags}
    base, left = datetime.now(UTC) - timedelta(minutes=5), list(dags)
    while left:
        batch = {dag: [api.trigger(dag, logical_date=base + timedelta(seconds=len(runs[dag]) + i),
                                   run_id=unique_run_id(dag)) for i in range(at_once)] for dag in left}
        for dag, ids in batch.items():
            runs[dag] += ids
            states = {run: api.wait_run(dag, run, timeout=timeout) for run in ids}
            assert set(states.values()) == {"success"}, f"{dag}: {states}"
            if (any(api.task_instance(dag, run, "coordinate")["state"] == "skipped" for run in ids)
                    or len(runs[dag]) > MAX_RUNS):
                left.remove(dag)
    return runs


def check_commits(store: TransactionStore, expected_last: int | None = None) -> dict[int, TxidRecord]:
    """Committed up to the last txid (``expected_last`` when given), every txid COMMITTED with no gap, first commits
    in strictly increasing txid order. Returns the records by txid."""
    topo, _ = store.read_topology()
    last = topo.committed_txid if expected_last is None else expected_last
    assert (topo.last_txid, topo.committed_txid) == (last, last), f"{store.topology}: txids still in flight"
    records = {t: r for t, (r, _) in store.read_txids(range(1, last + 1)).items()}
    assert sorted(records) == list(range(1, last + 1)), f"{store.topology}: a txid has no record: a gap"
    assert all(r.status is TxStatus.COMMITTED for r in records.values())
    committed_at = [min(h.at for h in records[t].history if h.status is TxStatus.COMMITTED) for t in sorted(records)]
    assert committed_at == sorted(committed_at) and len(set(committed_at)) == len(committed_at), \
        f"{store.topology}: commits out of txid order: {committed_at}"
    return records


def counts(client: redis.Redis, key: str) -> dict[str, int]:
    """A state's hash as {key: count}, from a client that answers bytes or text."""
    return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in client.hgetall(key).items()}
