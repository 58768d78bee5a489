"""A state store of the user's own (issue 33 item 1): examples/sqlite_store.py, a StateFactory and backing map
written from the docs alone, under all three map-state kinds, through LocalTopology and through the Spark job and
the commit (where txdag's PostgresStore goes the same way). A commit that dies inside one state's SQLite transaction
leaves none of that txid in it (a reader sees the txid before), and its replay makes every state exact: nothing
skipped, nothing counted twice.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from access import ZK_AUTH
from support.examples import example_module

from txdag.commit.phase import commit_transaction
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State, StoreRef, TweetsSource
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

SENTENCES = ["the cat sat", "on the mat", "the dog", "a cat and a dog", "the end", "cat dog cat", "mat", "one more"]


sqlite_store = example_module("sqlite_store")


def counts_in(path: Path, table: str) -> dict[str, int]:
    """What a reader of the table sees: each word's committed count (a plain, transactional or opaque row)."""
    with sqlite3.connect(path) as db:
        return {json.loads(key)[0]: int(value) for key, value in db.execute(f'SELECT key, value FROM "{table}"')}


def word_count(records):
    words = Counter((w,) for r in records for w in r.value.split())
    return {"t": words, "o": words, "n": words}


@pytest.fixture
def coordinator(redis_client, zk_hosts, zk_root, prefix):
    append_tweets(redis_client, SENTENCES, prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    return Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout)


def states(path: Path) -> list[State]:
    store = sqlite_store.SqliteStore(str(path))
    return [State("t", store=store), State("o", kind="opaque", store=store),
            State("n", kind="non_transactional", store=store)]


def test_three_kinds_in_a_users_store_stay_exact_through_a_commit_that_dies_inside_a_transaction(
        redis_client, coordinator, prefix, tmp_path, monkeypatch):
    db = tmp_path / "counts.db"
    topology = LocalTopology(coordinator, redis_client,
                             {s.name: s.build(redis_client, prefix) for s in states(db)}, word_count)
    tables = {name: f"{prefix}__{name}" for name in "ton"}  # the store's default: the topology's and the state's
    one = topology.coordinate("r1")
    topology.process(one)
    assert isinstance(topology.commit(one.tx), Committed)
    after_one = {name: counts_in(db, table) for name, table in tables.items()}

    put, died_in = sqlite_store.SqliteBackingMap.multi_put, []

    def dies_inside_o(self, keys, values):  # after state 't' committed txid 2: 'o' holds the file's write lock
        put(self, keys, values)
        if self.table == f'"{tables["o"]}"':
            died_in.append(self.table)
            raise ConnectionError(f"the store went away half way through state {self.table}")

    monkeypatch.setattr(sqlite_store.SqliteBackingMap, "multi_put", dies_inside_o)
    two = topology.coordinate("r2")
    topology.process(two)
    with pytest.raises(ConnectionError, match="half way"):
        topology.commit(two.tx)
    assert died_in and counts_in(db, tables["o"]) == after_one["o"], "a reader saw part of txid 2 in state 'o'"
    monkeypatch.undo()

    replay = topology.coordinate("r2")  # its run again: txid 2 re-emitted (transactional: the same tweets)
    assert replay.tx.txid == 2 and replay.tx.attempt == 2
    topology.process(replay)
    assert isinstance(topology.commit(replay.tx), Committed)
    while isinstance(emission := topology.coordinate(f"run{coordinator.status().topology.last_txid}"), Emission):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)
    truth = dict(Counter(w for s in SENTENCES for w in s.split()))
    assert {name: counts_in(db, table) for name, table in tables.items()} == {"t": truth, "o": truth, "n": truth}
    with sqlite3.connect(db) as read:
        kinds = {name: {k for (k,) in read.execute(f'SELECT DISTINCT kind FROM "{table}"')}
                 for name, table in tables.items()}
        last = read.execute(f'SELECT max(txid) FROM "{tables["t"]}"').fetchone()[0]
    assert kinds == {"t": {"transactional"}, "o": {"opaque"}, "n": {"plain"}}
    assert last == coordinator.status().topology.committed_txid == 3


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_a_spark_job_stages_for_a_users_store_and_the_commit_applies_it(redis_client, coordinator, prefix,
                                                                          tmp_path, spark, where, request):
    from pyspark.sql import functions as F

    from txdag.spark.runner import run_job

    def process(batch):
        words = batch.select(F.explode(F.split("value", " ")).alias("word")).groupBy("word").count()
        return {"t": words, "o": words, "n": words}

    db = tmp_path / "counts.db"
    declared, read = states(db), lambda name: counts_in(db, f"{prefix}__{name}")
    if where == "postgres":  # txdag's own store (txdag.airflow.stores), in one SQL transaction per txid
        declared, read = postgres_states(request, prefix)
    source = TweetsSource(max_transaction_size=3, prefix=f"{prefix}:")
    live = {s.name: s.build(redis_client, prefix) for s in declared}
    while isinstance(emission := coordinator.coordinate(f"run{coordinator.status().topology.last_txid}"), Emission):
        spec = JobSpec.from_json(JobSpec(prefix, emission.tx, emission.metadata, source, tuple(declared)).to_json())
        assert all(isinstance(s.store, StoreRef) for s in spec.states)  # the job knows the store by name only
        run_job(spec, process, {"redis_default": redis_client}, spark)
        assert coordinator.mark_processed(emission.tx)
        outcome = commit_transaction(coordinator, Staging(redis_client, prefix), redis_client, emission.tx, live)
        assert isinstance(outcome, Committed), outcome
    truth = dict(Counter(w for s in SENTENCES for w in s.split()))
    assert {name: read(name) for name in "ton"} == {"t": truth, "o": truth, "n": truth}


def postgres_states(request, prefix: str):
    """The three states in a schema of the test's own (dropped afterwards), and how a reader counts them."""
    import psycopg
    from support.postgres import close_sessions, postgres_url

    from txdag.airflow.stores import PostgresStore

    store = PostgresStore(request.getfixturevalue("postgres_conn"), schema=prefix)
    reader = psycopg.connect(postgres_url(), autocommit=True)

    def drop() -> None:
        close_sessions()
        reader.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')
        reader.close()

    request.addfinalizer(drop)
    declared = [State("t", store=store), State("o", kind="opaque", store=store),
                State("n", kind="non_transactional", store=store)]
    return declared, lambda name: {word: int(value) for word, value in reader.execute(
        f"SELECT k1 #>> '{{}}', value FROM \"{prefix}\".\"{prefix}__{name}\"").fetchall()}
