"""A state store of the user's own through the real Airflow path (issue 33 item 1): examples/sqlite_store.py, saved
as a module beside the DAG files as a user would, keeps the word count's state in a SQLite table, in both Spark
modes: the Spark job (spark-submit, or the task's Connect session) stages the counts, knowing the store by name
only, and the commit task builds the store from the DAG file and applies each txid in one SQLite transaction.
txdag's PostgresStore (issue 33 item 2) goes the same way, through the Postgres provider's connection.
A committed run cleared from the UI replays its txid and changes no count.
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
from e2e_runs import run_of_txid, trigger_until_drained
from support.postgres import postgres_url
from support.runs import check_commits

from txdag.spouts import append_tweets
from txdag.spouts.samples import sample_tweets

MODES = {"sqlite_submit": "submit", "sqlite_connect": "connect", "postgres_connect": "connect"}
BATCH, TXIDS = 10, 3


def dag_file(topology: str, mode: str, db: Path) -> str:
    store = (f"PostgresStore(schema={topology!r})" if topology.startswith("postgres") else
             f"SqliteStore({str(db)!r}, table='words')")
    return f"""# An Airflow DAG: the word count, its state in a table (SQLite: a module of the user's beside the DAGs)
from sqlite_store import SqliteStore

from txdag import TransactionalTopology
from txdag.airflow.stores import PostgresStore
from txdag.airflow import render
from txdag.topology.definition import State, TweetsSource

topology = TransactionalTopology(
    {topology!r},
    source=TweetsSource(prefix={topology + ":"!r}, max_transaction_size={BATCH}),
    job={str(REPO / "spark_jobs" / "word_count.py")!r},
    states=[State("words", kind="opaque", store={store})],
    spark_mode={mode!r},
    max_active_transactions=2,
)
dag = render(topology, dag_file=__file__)
"""


def table(db: Path, topology: str) -> dict[str, tuple[int, int]]:
    """What a reader of the table sees: word -> (count, the txid it includes)."""
    if topology.startswith("postgres"):
        with psycopg.connect(postgres_url()) as read:
            rows = read.execute(f'SELECT k1 #>> \'{{}}\', value, txid FROM "{topology}"."{topology}__words"').fetchall()
        return {word: (int(value), txid) for word, value, txid in rows}
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
    if topology.startswith("postgres"):  # an earlier session's tables would be ahead of this ZooKeeper's txids
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{topology}" CASCADE')
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
