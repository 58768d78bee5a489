"""A backlog drains by itself (issue 34 item 3): a topology with ``drain=Backlog(...)`` is scheduled on its source,
watched by Airflow's triggerer, and commits a backlog of several batches with nobody triggering a run: a full batch
starts a txid at once, the few entries left after the wait, never more txids in flight than its maximum; an idle
source starts nothing; new entries start the next txid; entries that came while the DAG was paused start a txid
soon after it is unpaused. The states hold every tweet once."""

from __future__ import annotations

import time

import pytest
import redis
from conftest import REPO, AirflowInstance

from txdag.analytics.tweets import tweet_partials
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX, BATCH = "drain_tweets", "drain:", 20
DAG_FILE = f"""# An Airflow DAG: the tweets job, warm, that its source's backlog schedules
from datetime import timedelta

from txdag import Backlog, TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {TOPOLOGY!r},
    source=TweetsSource(prefix={PREFIX!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[
        State("users", namespace="drain_users"),
        State("hashtags", namespace="drain_hashtags"),
        State("users_hashtags", key_fields=2, separator=":", namespace="drain_users_hashtags"),
    ],
    spark_mode="connect",
    max_active_transactions=2,
    drain=Backlog(entries={BATCH}, wait=timedelta(seconds=5), poll=1),
)
dag = render(topology, dag_file=__file__)
"""


def committed(store, txid: int, timeout: float = 300) -> None:
    deadline, topology = time.monotonic() + timeout, None
    while not store.client.exists(store.path) or (topology := store.read_topology()[0]).committed_txid < txid:
        assert time.monotonic() < deadline, f"not txid {txid} committed after {timeout} s: {topology}"
        time.sleep(1)


def finished_runs(airflow: AirflowInstance, timeout: float = 60) -> list[dict]:
    """The topology's runs once none is queued or running (a run ends a moment after its commit)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = airflow.api.runs(TOPOLOGY)
        if not any(r["state"] in ("queued", "running") for r in runs):
            return runs
        assert time.monotonic() < deadline, runs
        time.sleep(1)


def users(client) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall("drain_users").items()}


def expected_users(tweets: list[str]) -> dict[str, int]:
    """The users state as the reference computation counts them (txdag.analytics.tweets)."""
    return {key[0]: int(n) for key, n in tweet_partials(tweets)["users"].items()}


def test_a_backlog_of_several_batches_commits_with_no_run_triggered_from_outside(airflow: AirflowInstance,
                                                                                 store_of) -> None:
    client = redis.Redis.from_url(airflow.redis_url)
    tweets = sample_tweets(3 * BATCH + 5, seed=34)
    append_tweets(client, tweets, prefix=PREFIX)
    airflow.add_dag_file(f"{TOPOLOGY}.py", DAG_FILE)
    airflow.api.wait_dag_parsed(TOPOLOGY, timeout=120)
    airflow.api.unpause(TOPOLOGY)
    try:
        store = store_of(TOPOLOGY)
        committed(store, 4)  # three full batches, then the five left once they waited 5 s
        topology = store.read_topology()[0]
        assert (topology.last_txid, topology.committed_txid) == (4, 4), topology
        runs = finished_runs(airflow)
        assert [r["run_type"] for r in runs] == ["asset_triggered"] * 4, runs
        assert {r["state"] for r in runs} == {"success"}, runs
        assert users(client) == expected_users(tweets)  # each tweet counted once
        log = airflow.component_log("triggerer", tail=2000)
        started = [line for line in log.splitlines() if f"topology={TOPOLOGY}: " in line and "starting a run" in line]
        assert len(started) == 4, started
        assert max(int(line.split(" txid(s) in flight")[0].rsplit(" ", 1)[1]) for line in started) <= 1, started
        assert f"topology={TOPOLOGY}: 5 source entries wait, " in started[-1] and "after txid 3" in started[-1], started

        time.sleep(8)  # an idle source starts nothing
        assert len(airflow.api.runs(TOPOLOGY)) == 4
        more = sample_tweets(3, seed=35)
        append_tweets(client, more, prefix=PREFIX)
        committed(store, 5)
        assert users(client) == expected_users(tweets + more)
        assert len(airflow.api.runs(TOPOLOGY)) == 5

        airflow.api.pause(TOPOLOGY)  # a paused DAG: Airflow drops the source's events, the watch tries again
        paused = sample_tweets(BATCH, seed=36)
        append_tweets(client, paused, prefix=PREFIX)
        time.sleep(10)
        assert len(airflow.api.runs(TOPOLOGY)) == 5 and store.read_topology()[0].last_txid == 5
        airflow.api.unpause(TOPOLOGY)
        unpaused = time.monotonic()
        committed(store, 6, timeout=90)  # not after the 120 s of the watch's last resort
        assert users(client) == expected_users(tweets + more + paused)
        print(f"txid 6 committed {time.monotonic() - unpaused:.1f} s after the unpause")
    finally:
        airflow.api.pause(TOPOLOGY)
