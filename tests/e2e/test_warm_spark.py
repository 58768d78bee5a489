"""Warm mode end to end: topologies in spark_mode="connect" through a real scheduler, on the session's Spark
Connect server (conftest). The tweets job with the ``process`` fault point firing in txid 2 (the job dies
mid-batch inside the task: the retry processes attempt 2), then a replay of every txid that changes nothing; seed
004's opaque word count with two txids processed at once in the topology's one session; a seed 002 stateful step,
whose rows the server's Python workers process. Counts equal the ground truth, commits are ordered with no gap.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_data import WARM_FAULT, running_sum_truth, word_counts
from e2e_runs import overlapped, process_intervals, trigger_until_drained
from support.runs import check_commits, counts

from txdag.analytics.tweets import tweet_partials
from txdag.spouts import StreamPartition, append_entries, append_tweets
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.state.kv import KeyValueState
from txdag.zk.records import TxStatus

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

TOPOLOGY, PREFIX, BATCH = "tweets_warm", "warm:", 60
DAG_FILE = f"""# An Airflow DAG (Airflow's safe mode parses only files that say so): the tweets job, warm.
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
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
dag = render(topology, dag_file=__file__)
"""


def start_dag(airflow: AirflowInstance, dag_id: str, source: str) -> None:
    airflow.add_dag_file(f"{dag_id}.py", source)
    airflow.api.wait_dag_parsed(dag_id, timeout=120)
    airflow.api.unpause(dag_id)


def seconds(ti: dict) -> float:
    start, end = (datetime.fromisoformat(ti[k].replace("Z", "+00:00")) for k in ("start_date", "end_date"))
    return (end - start).total_seconds()


def test_warm_mode_is_exactly_once_through_a_crash_and_a_replay(airflow: AirflowInstance, store_of) -> None:
    store = store_of(TOPOLOGY)
    tweets = sample_tweets(4 * BATCH - 7, seed=41)
    source = redis.Redis.from_url(airflow.redis_url)
    append_tweets(source, tweets, prefix=PREFIX)
    start_dag(airflow, TOPOLOGY, DAG_FILE)
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
    # scripts/airflow.sh's local settings: the scheduler imported the Connect client before it forked the workers
    assert "the Spark Connect client was imported before this task" in log, log[-3000:]

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


WORDS_DAG = f"""# An Airflow DAG: seed 004's word count (opaque streams into an OpaqueMap), warm.
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, StreamsSource

topology = TransactionalTopology(
    "word_count_warm",
    source=StreamsSource(streams=["warm:sentences:0", "warm:sentences:1"], opaque=True, max_per_partition=40),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", kind="opaque", namespace="warm_word_count")],
    spark_mode="connect",
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""

STATEFUL_DAG = f"""# An Airflow DAG: a seed 002 stateful step (running counts in a KeyValueState), warm.
from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import KeyValue, State, TweetsSource

topology = TransactionalTopology(
    "stateful_warm",
    source=TweetsSource(max_transaction_size=40, prefix="warm_stateful:"),
    job={str(REPO / "tests" / "e2e" / "jobs" / "running_counts.py")!r},
    states=[State("running_sum", key_fields=0, namespace="stateful_warm:running_sum")],
    key_values=[KeyValue("counts")],
    spark_mode="connect",
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""


def test_opaque_word_count_warm_two_txids_at_once(airflow: AirflowInstance, store_of) -> None:
    """Two process tasks at a time, both in the topology's one Connect session; the OpaqueMap counts are exact."""
    client = redis.Redis.from_url(airflow.redis_url)
    sentences = {f"warm:sentences:{i}": sample_sentences(100, seed=50 + i) for i in range(2)}
    for stream, lines in sentences.items():
        append_entries(StreamPartition(stream, client, stream), lines)
    start_dag(airflow, "word_count_warm", WORDS_DAG)
    runs = trigger_until_drained(airflow, "word_count_warm", at_once=2)
    check_commits(store_of("word_count_warm"), 3)
    assert counts(client, "warm_word_count") == dict(word_counts(sentences))
    assert overlapped(process_intervals(airflow, "word_count_warm", runs)), "no two txids processed at once"


def test_stateful_step_warm(airflow: AirflowInstance, store_of) -> None:
    """A stateful step's rows run through the Connect server's Python workers (mapInArrow), state as of txid - 1."""
    client = redis.Redis.from_url(airflow.redis_url)
    sentences = sample_sentences(120, seed=60)
    append_tweets(client, sentences, prefix="warm_stateful:")
    start_dag(airflow, "stateful_warm", STATEFUL_DAG)
    trigger_until_drained(airflow, "stateful_warm", at_once=2)
    check_commits(store_of("stateful_warm"), 3)
    truth, expected_sum = running_sum_truth(sentences, batch=40)
    assert dict(KeyValueState(client, "stateful_warm:counts").items()) == dict(truth)
    assert client.hget("stateful_warm:running_sum", "$GLOBAL$") == str(expected_sum).encode()
