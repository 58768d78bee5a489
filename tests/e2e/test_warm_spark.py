"""Warm mode end to end: the tweets job in spark_mode="connect" through a real scheduler, on the session's Spark
Connect server (conftest), with the ``process`` fault point firing in txid 2 (the job dies mid-batch inside the
task: the retry processes attempt 2). The counts equal the ground truth, commits are ordered with no gap, and
a replay of every txid changes nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from access import ZK_AUTH
from conftest import REPO, AirflowInstance
from e2e_data import WARM_FAULT

from txdag.analytics.tweets import tweet_partials
from txdag.sample import sample_tweets
from txdag.spouts import append_tweets
from txdag.zk.client import close_zk, connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore

TOPOLOGY, PREFIX, BATCH = "tweets_warm", "warm:", 60
DAG_FILE = f"""# An Airflow DAG (Airflow's safe mode parses only files that say so): the tweets job, warm.
from txdag import TransactionalTopology
from txdag.definition import State, TweetsSource

TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[
        State("users", namespace="warm_users"),
        State("hashtags", namespace="warm_hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="warm_users_hashtags"),
    ],
    spark_mode="connect",
    max_active_transactions=2,
)
"""


@pytest.fixture
def store(airflow: AirflowInstance) -> Iterator[TransactionStore]:
    client = connect_zk(airflow.zk_hosts, auth=ZK_AUTH)
    yield TransactionStore(client, TOPOLOGY, root=airflow.zk_root)
    close_zk(client)


def counts(client: redis.Redis, key: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(key).items()}


def seconds(ti: dict) -> float:
    start, end = (datetime.fromisoformat(ti[k].replace("Z", "+00:00")) for k in ("start_date", "end_date"))
    return (end - start).total_seconds()


def test_warm_mode_is_exactly_once_through_a_crash_and_a_replay(airflow: AirflowInstance, store) -> None:
    tweets = sample_tweets(4 * BATCH - 7, seed=41)
    source = redis.Redis.from_url(airflow.redis_url)
    append_tweets(source, tweets, prefix=PREFIX)
    airflow.add_dag_file(f"{TOPOLOGY}.py", DAG_FILE)
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    airflow.api.unpause(TOPOLOGY)
    base = datetime.now(UTC) - timedelta(minutes=10)
    runs = [airflow.api.trigger(TOPOLOGY, logical_date=base + timedelta(seconds=i), run_id=f"{TOPOLOGY}__{i}")
            for i in range(1, 5)]
    states = {r: airflow.api.wait_run(TOPOLOGY, r, timeout=600) for r in runs}
    assert set(states.values()) == {"success"}, states

    topology, _ = store.read_topology()
    records = {t: r for t, (r, _) in store.read_txids(store.list_txids()).items()}
    assert topology.committed_txid == 4 and all(records[t].status is TxStatus.COMMITTED for t in range(1, 5))
    assert [records[t].run_id for t in range(1, 5)] == runs
    assert f"{WARM_FAULT.replace(':', '-')}" in airflow.fired_faults()
    crashed = airflow.api.task_instance(TOPOLOGY, runs[1], "process")
    assert crashed["try_number"] == 2 and records[2].attempt == 2, (crashed, records[2])
    log = airflow.api.task_log(TOPOLOGY, runs[0], "process", 1)
    assert "(connect mode)" in log and "txdag job done: topology=tweets_warm txid=1" in log, log[-3000:]

    truth = tweet_partials(tweets)
    expected = {
        "warm_users": {k[0]: n for k, n in truth["users"].items()},
        "warm_hashtags": {k[0]: n for k, n in truth["hashtags"].items()},
        "warm_users_hashtags": {f"{k[0]}:{k[1]}": n for k, n in truth["users_hashtags"].items()},
    }
    assert {key: counts(source, key) for key in expected} == expected

    # Replay every txid (clear the runs): the batches are re-emitted, their commits change nothing.
    cleared = airflow.api.clear(TOPOLOGY, runs[0], include_future=True)
    assert {ti["dag_run_id"] for ti in cleared} == set(runs)
    states = {r: airflow.api.wait_run(TOPOLOGY, r, timeout=600) for r in runs}
    assert set(states.values()) == {"success"}, states
    assert {key: counts(source, key) for key in expected} == expected
    assert store.read_topology()[0].committed_txid == 4
    assert all(store.read_txid(t)[0].attempt == records[t].attempt + 1 for t in range(1, 5))

    warm = [seconds(airflow.api.task_instance(TOPOLOGY, r, "process")) for r in (runs[0], runs[2], runs[3])]
    print(f"\nwarm process task seconds (txids 1, 3, 4 after the replay): {warm}; median "
          f"{statistics.median(warm):.1f} s")
