"""A state store of the user's own through the real Airflow path (issue 33 item 1): examples/sqlite_store.py, saved
as a module beside the DAG files as a user would, keeps the word count's state in a SQLite table, in both Spark
modes: the Spark job (spark-submit, or the task's Connect session) stages the counts, knowing the store by name
only, and the commit task builds the store from the DAG file and applies each txid in one SQLite transaction.
A committed run cleared from the UI replays its txid and changes no count.

txdag's PostgresStore (issue 33 items 2 and 6), through the Postgres provider's connection: seed 000's tweets
analytics with its three states in PostgreSQL, one of each kind, through a Spark job killed mid-batch, a commit
task killed between the database's commit and ZooKeeper's record, and `txdag replay --from 1`: exact against a
count made straight from the tweets.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import redis
from conftest import REPO, AirflowInstance
from e2e_runs import run_of_txid, trigger_until_drained, txdag_replay, wait_runs
from support.postgres import postgres_url
from support.runs import check_commits

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets

pytestmark = pytest.mark.own_topologies  # no wait for the hour's scheduled runs (conftest)

MODES = {"sqlite_submit": "submit", "sqlite_connect": "connect"}
BATCH, TXIDS = 10, 3


def dag_file(topology: str, mode: str, db: Path) -> str:
    return f"""# An Airflow DAG: the word count, its state in a SQLite table (a module of the user's beside the DAGs)
from sqlite_store import SqliteStore

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {topology!r},
    source=TweetsSource(prefix={topology + ":"!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", kind="opaque", store=SqliteStore({str(db)!r}, table='words'))],
    spark_mode={mode!r},
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""


def table(db: Path, topology: str) -> dict[str, tuple[int, int]]:
    """What a reader of the table sees: word -> (count, the txid it includes)."""
    with sqlite3.connect(db) as read:
        rows = read.execute("SELECT key, value, txid FROM words").fetchall()
    return {json.loads(key)[0]: (int(value), txid) for key, value, txid in rows}


@pytest.mark.parametrize("topology", list(MODES))
def test_a_users_store_beside_the_dags_holds_the_state_exactly_once_through_airflow(
        airflow: AirflowInstance, store_of, tmp_path: Path, topology: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (airflow.dags_folder / "sqlite_store.py").write_text((REPO / "examples" / "sqlite_store.py").read_text())
    monkeypatch.syspath_prepend(str(airflow.dags_folder))  # as Airflow's components have it (add_dag_file reads it)
    tweets = sample_tweets(TXIDS * BATCH, seed=len(topology))
    append_tweets(redis.Redis.from_url(airflow.redis_url), tweets, prefix=f"{topology}:")
    db = tmp_path / "counts.db"
    airflow.add_dag_file(f"{topology}.py", dag_file(topology, MODES[topology], db))
    airflow.api.wait_dag_parsed(topology, timeout=120)
    airflow.api.unpause(topology)

    trigger_until_drained(airflow, topology, at_once=2)
    records = check_commits(store_of(topology), TXIDS)
    truth = dict(Counter(w for tweet in tweets for w in tweet.split(" ") if w))
    committed = table(db, topology)
    assert {word: count for word, (count, _) in committed.items()} == truth
    assert max(txid for _, txid in committed.values()) == TXIDS

    run1 = run_of_txid(records, 1)
    airflow.api.clear_run(topology, run1)  # the UI's clear of a committed run: txid 1 replayed, nothing changes
    assert airflow.api.wait_run(topology, run1, timeout=600) == "success"
    assert table(db, topology) == committed


ANALYTICS = "analytics_pg"


def analytics_dag() -> str:
    return f"""# An Airflow DAG: seed 000's tweets analytics, its states in PostgreSQL (the connection txdag_postgres)
from datetime import timedelta

from txdag import TransactionalTopology
from txdag.airflow import render
from txdag.airflow.stores import PostgresStore
from txdag.topology.definition import State, TweetsSource

store = PostgresStore(schema={ANALYTICS!r})
topology = TransactionalTopology(
    {ANALYTICS!r},
    source=TweetsSource(prefix={ANALYTICS + ":"!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "tweets_analytics.py")!r},
    states=[State("users", store=store), State("hashtags", kind="opaque", store=store),
            State("users_hashtags", key_fields=2, kind="non_transactional", store=store)],
    spark_mode="connect",
    max_active_transactions=2,
    retry_delay=timedelta(seconds=5),
)
dag = render(topology, dag_file=__file__)
"""


def analytics_tables() -> tuple[dict[str, Counter], int | None]:
    """Each state's counts by key tuple, and the txid txdag_commits holds, read in one snapshot."""
    with psycopg.connect(postgres_url()) as read:
        read.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        out = {}
        for state in STATES:
            keys = "k1 #>> '{}', k2 #>> '{}'" if state == "users_hashtags" else "k1 #>> '{}'"
            rows = read.execute(f'SELECT {keys}, value FROM "{ANALYTICS}"."{ANALYTICS}__{state}"').fetchall()
            out[state] = Counter({tuple(row[:-1]): int(row[-1]) for row in rows})
        held = read.execute(f'SELECT txid FROM "{ANALYTICS}".txdag_commits WHERE topology = %s',
                            (ANALYTICS,)).fetchone()
    return out, None if held is None else held[0]


def test_the_tweets_analytics_in_postgresql_stays_exact_through_killed_tasks_and_a_replay(
        airflow: AirflowInstance, store_of) -> None:
    """Spark Connect mode (the task process is the Spark driver): txid 1's job is SIGKILLed mid-batch
    (process:analytics_pg:1:1), txid 2's commit task after the database committed and the Redis marker was written,
    before ZooKeeper's record (commit:analytics_pg:2:1: its retry finds the txid applied and writes nothing, so even
    the non-transactional state stays exact; a crash between the database's commit and the marker is
    test_postgres_store's). Then `txdag replay --from 1` clears every run, which ZooKeeper answers as committed:
    nothing changes."""
    tweets = sample_tweets(TXIDS * BATCH, seed=33)
    append_tweets(redis.Redis.from_url(airflow.redis_url), tweets, prefix=f"{ANALYTICS}:")
    with psycopg.connect(postgres_url(), autocommit=True) as admin:  # an earlier session's tables would be ahead
        admin.execute(f'DROP SCHEMA IF EXISTS "{ANALYTICS}" CASCADE')
    airflow.add_dag_file(f"{ANALYTICS}.py", analytics_dag())
    airflow.api.wait_dag_parsed(ANALYTICS, timeout=120)
    airflow.api.unpause(ANALYTICS)

    trigger_until_drained(airflow, ANALYTICS, at_once=2)
    records = check_commits(store_of(ANALYTICS), TXIDS)
    assert {f"process-{ANALYTICS}-1-1", f"commit-{ANALYTICS}-2-1"} <= airflow.fired_faults()
    assert records[1].attempt >= 2, "the killed job's txid committed on its first attempt"
    truth = {state: Counter(counts) for state, counts in tweet_partials(tweets).items()}
    assert analytics_tables() == (truth, TXIDS)

    out = txdag_replay(airflow, ANALYTICS, 1)  # every txid again, from the metadata ZooKeeper keeps
    assert f"txid {TXIDS}: clearing run" in out, out
    wait_runs(airflow, ANALYTICS, [run_of_txid(records, t) for t in records])
    replayed = check_commits(store_of(ANALYTICS), TXIDS)
    assert all(replayed[t].attempt > records[t].attempt for t in records), "a cleared run did not run again"
    assert analytics_tables() == (truth, TXIDS)
