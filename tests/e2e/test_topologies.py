"""The shipped topologies end to end: real Airflow scheduler, real spark-submit, real Redis and ZooKeeper.

For each: the committed state equals the ground truth computed here from the loaded data, commits are in
strictly increasing txid order with no gap, processing of two txids overlapped, and replays change nothing.
The tweets topology also survives txid 3's Spark job dying mid-batch (the fault plan in e2e_data.FAULTS).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from conftest import REPO, AirflowInstance

from txdag.airflow.api import unique_run_id
from txdag.state.keys import JoinedKeyCodec
from txdag.state.redis_backing import aux_key
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

RUN_TIMEOUT = 600


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture
def store_of(airflow: AirflowInstance) -> Iterator:
    client = connect_zk(airflow.zk_hosts)
    yield lambda topology: TransactionStore(client, topology, root=airflow.zk_root)
    close_zk(client)


@pytest.fixture
def state_redis(airflow: AirflowInstance) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(airflow.redis_url, decode_responses=True)
    yield client
    client.close()


def hash_counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {field: int(value) for field, value in client.hgetall(key).items()}


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


def process_intervals(airflow: AirflowInstance, dag_id: str, runs: list[str]) -> list[tuple[datetime, datetime]]:
    tis = [airflow.api.task_instance(dag_id, run, "process") for run in runs]
    return [(_dt(ti["start_date"]), _dt(ti["end_date"])) for ti in tis if ti["state"] == "success"
            and ti["start_date"]]


def overlapped(intervals: list[tuple[datetime, datetime]]) -> bool:
    return any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(intervals) for b in intervals[i + 1:])


def run_of_txid(records: dict, txid: int) -> str:
    return records[txid].run_id


def test_tweets_analytics_exactly_once_through_a_crash_and_replays(airflow, store_of, state_redis) -> None:
    dag = "tweets_analytics"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    scheduled = settle(airflow, dag)
    assert any(r["run_type"] == "scheduled" for r in scheduled), scheduled
    store = store_of(dag)
    assert store.read_topology()[0].committed_txid == 1, "the first scheduled run emits one batch: txid 1"

    manual = trigger_until_drained(airflow, dag, at_once=2)
    records = check_commits(store, 5)
    truth = airflow.sources.tweets_truth()
    pair = JoinedKeyCodec(":", 2)
    expected_pairs: dict[str, int] = {}
    for key, n in truth["users_hashtags"].items():
        expected_pairs[pair.encode(key)] = expected_pairs.get(pair.encode(key), 0) + n
    assert hash_counts(state_redis, "users") == {k[0]: n for k, n in truth["users"].items()}
    assert hash_counts(state_redis, "hashtags") == {k[0]: n for k, n in truth["hashtags"].items()}
    assert hash_counts(state_redis, "users_hashtags") == expected_pairs
    assert state_redis.get("LAST_COMMITED_TRANSACTION") == "5"

    assert overlapped(process_intervals(airflow, dag, manual)), "no two txids were processed at the same time"

    # txid 3's first attempt died inside its Spark job; its retry processed attempt 2, and txid 4 waited.
    crashed = records[3]
    assert crashed.attempt == 2 and [h.attempt for h in crashed.history][0] == 1
    run3, run4 = run_of_txid(records, 3), run_of_txid(records, 4)
    assert airflow.api.task_instance(dag, run3, "process")["try_number"] == 2
    assert "TXDAG FAULT process topology=tweets_analytics txid=3 attempt=1" in airflow.api.task_log(
        dag, run3, "process", 1)
    commit4 = airflow.api.task_log(dag, run4, "commit", airflow.api.task_instance(dag, run4, "commit")["try_number"])
    assert "txid=4" in commit4 and "committed" in commit4

    # Clear a committed run: it replays its txid (attempt + 1) and changes no count.
    before = {k: hash_counts(state_redis, k) for k in ("users", "hashtags", "users_hashtags")}
    run2 = run_of_txid(records, 2)
    airflow.api.clear_run(dag, run2)
    wait_runs(airflow, dag, [run2])
    assert store.read_txid(2)[0].attempt == records[2].attempt + 1
    # Clear with Future from txid 4's run (its logical date is before txid 5's): both replay, nothing changes.
    cleared = airflow.api.clear(dag, run4, include_future=True)
    assert {ti["dag_run_id"] for ti in cleared} >= {run4, run_of_txid(records, 5)}
    wait_runs(airflow, dag, [run4, run_of_txid(records, 5)])
    assert store.read_txid(5)[0].attempt == records[5].attempt + 1
    assert {k: hash_counts(state_redis, k) for k in before} == before

    # txdag's own "replay from txid N" clears by txid, whatever the runs' logical dates.
    attempts = {t: store.read_txid(t)[0].attempt for t in (4, 5)}
    env = {**airflow.env, "TXDAG_AIRFLOW_URL": airflow.base_url, "TXDAG_AIRFLOW_PASSWORD": airflow.password}
    replay = subprocess.run([str(REPO / ".venv" / "bin" / "txdag"), "replay", dag, "--from", "4"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert replay.returncode == 0, replay.stderr
    assert f"txid 4: clearing run {run4}" in replay.stdout and "txid 5: clearing run" in replay.stdout
    wait_runs(airflow, dag, [run4, run_of_txid(records, 5)])
    assert {t: store.read_txid(t)[0].attempt for t in (4, 5)} == {t: a + 1 for t, a in attempts.items()}
    assert {k: hash_counts(state_redis, k) for k in before} == before
    assert state_redis.get("LAST_COMMITED_TRANSACTION") == "5"
    check_commits(store, 5)


def test_word_count_opaque_streams_exactly_once(airflow, store_of, state_redis) -> None:
    dag = "word_count"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    settle(airflow, dag)
    manual = trigger_until_drained(airflow, dag, at_once=2)
    check_commits(store_of(dag), 3)
    assert hash_counts(state_redis, "word_count") == dict(airflow.sources.words_truth())
    assert overlapped(process_intervals(airflow, dag, manual))


def test_global_count_backfill_drains_the_backlog(airflow, store_of, state_redis) -> None:
    dag = "global_count"
    airflow.api.wait_dag_parsed(dag, timeout=120)
    settle(airflow, dag)
    backfill = airflow.api.backfill(dag, "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z", max_active_runs=2)
    assert backfill["max_active_runs"] == 2
    runs = [r for r in settle(airflow, dag) if r.get("run_type") == "backfill"]
    assert len(runs) == 3 and {r["state"] for r in runs} == {"success"}, runs
    records = check_commits(store_of(dag), 3)
    assert state_redis.hget("global_count", "$GLOBAL$") == str(len(airflow.sources.counted))
    assert state_redis.hget(aux_key("global_count", "txid"), "$GLOBAL$") == "3"
    backfilled = [r["dag_run_id"] for r in runs if r["dag_run_id"] in {rec.run_id for rec in records.values()}]
    assert overlapped(process_intervals(airflow, dag, backfilled)), "the backfill processed one txid at a time"
