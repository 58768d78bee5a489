"""Crash and compare at every named fault point, over every kind of store (issue 33 item 6): a process runs the word
count over Redis, a Redis Cluster, PostgreSQL (txdag.airflow.stores.PostgresStore) and the guide's example store
(examples/sqlite_store.py), and is SIGKILLed at one point of txid 2 (txdag.faults); a new process then does what
clearing that run in Airflow does (its coordinate, process and commit again) and drains the rest. A transactional
and an opaque state must then equal a count made straight from the tweets. ("prepared" is a point of key-value
states, which live in Redis only.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import redis
from access import ZK_AUTH
from support.examples import example_module
from support.postgres import close_sessions, postgres_url

from txdag import faults
from txdag.airflow.stores import PostgresStore
from txdag.local import LocalTopology
from txdag.protocol import AlreadyCommitted, Committed
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state.kv import make_client, parse_provider_config
from txdag.topology.definition import State
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

SENTENCES = ["the cat sat", "on the mat", "the dog", "a cat and a dog", "the end", "cat dog cat", "mat", "one more"]
TRUTH = Counter(w for s in SENTENCES for w in s.split())
POINTS = [p for p in faults.POINTS if p != "prepared"]
STORES = ["redis", "redis_cluster", "postgres", "sqlite"]

CHILD = """
import sys
from test_fault_points_every_store import build

build(*sys.argv[1:]).drain(run_prefix="run")
"""


def word_count(records):
    words = Counter((w,) for r in records for w in r.value.split())
    return {"t": words, "o": words}


def build(store: str, redis_url: str, zk_hosts: str, zk_root: str, prefix: str, where: str) -> LocalTopology:
    """The word count of SENTENCES, 3 tweets per txid, a transactional state "t" and an opaque one "o" in ``store``
    (``where``: the cluster's client configuration as JSON, the Airflow connection id, the SQLite file)."""
    client = redis.Redis.from_url(redis_url)
    spout = TweetsTransactionalSpout(client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout)
    kept = {"redis": None, "redis_cluster": None, "postgres": lambda: PostgresStore(where, schema=prefix),
            "sqlite": lambda: example_module("sqlite_store").SqliteStore(where)}[store]
    states = [State(name, kind=kind, store=kept()) if kept else State(name, kind=kind, namespace=f"{prefix}:{name}")
              for name, kind in (("t", "transactional"), ("o", "opaque"))]
    home = client
    if store == "redis_cluster":  # the staging and the states on the cluster, the tweets on the server
        home = make_client(parse_provider_config("redis_cluster", json.loads(where)))
    return LocalTopology(coordinator, home, {s.name: s.build(home, prefix) for s in states}, word_count)


def counted(topology: LocalTopology) -> dict[str, Counter]:
    keys = [(w,) for w in sorted(TRUTH)]
    values = {name: topology.states[name].backing.multi_get(keys) for name in ("t", "o")}
    return {"t": Counter({k[0]: v.value for k, v in zip(keys, values["t"]) if v is not None}),
            "o": Counter({k[0]: v.curr for k, v in zip(keys, values["o"]) if v is not None})}


@pytest.fixture(params=STORES)
def store(request, prefix, tmp_path):
    """Where the states go, as build() takes it; what was written there is removed afterwards."""
    if request.param == "redis":
        yield "redis", ""
    elif request.param == "redis_cluster":
        cluster = request.getfixturevalue("redis_cluster")
        yield "redis_cluster", json.dumps(cluster.config())
        client = make_client(parse_provider_config("redis_cluster", cluster.config()))
        for key in list(client.scan_iter(match=f"*{prefix}*", count=1000)):
            client.delete(key)
        client.close()
    elif request.param == "postgres":
        yield "postgres", request.getfixturevalue("postgres_conn")
        close_sessions()
        with psycopg.connect(postgres_url(), autocommit=True) as db:
            db.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')
    else:
        yield "sqlite", str(tmp_path / "states.db")


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_fault_point_then_a_cleared_run_equals_the_truth(store, point, redis_client, redis_url,
                                                                        zk_hosts, zk_root, prefix, tmp_path):
    append_tweets(redis_client, SENTENCES, prefix=f"{prefix}:")
    args = [*store[:1], redis_url, zk_hosts, zk_root, prefix, store[1]]
    (tmp_path / "child.py").write_text(CHILD)
    tests = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TXDAG_FAULTS": f"{point}:{prefix}:2", "TXDAG_FAULTS_ALLOWED": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(tests)])}
    done = subprocess.run([sys.executable, str(tmp_path / "child.py"), *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, f"not killed at {point}: rc {done.returncode}\n{done.stderr[-3000:]}"

    built = []
    try:
        topology = build(*args)  # clearing txid 2's run: its coordinate, process and commit again
        built.append(topology)
        emission = topology.coordinate("run__1")
        assert isinstance(emission, Emission) and emission.tx.txid == 2, emission
        topology.process(emission, "run__1")
        assert isinstance(topology.commit(emission.tx), Committed | AlreadyCommitted)
        topology.drain(run_prefix="after")
        assert topology.coordinator.status().topology.committed_txid == 3
        assert counted(topology) == {"t": TRUTH, "o": TRUTH}
    finally:  # ZooKeeper takes 60 connections from one address: a test leaves none open
        for made in built:
            made.coordinator.store.client.stop()
            made.coordinator.store.client.close()
            made.client.close()
            made.coordinator.spout.client.close()
