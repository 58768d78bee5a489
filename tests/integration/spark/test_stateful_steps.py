"""Seed 002's stateful steps through the real pieces: Spark runs the step over each batch, Redis holds the
key-value state, ZooKeeper orders the txids; the commit prepares then commits, and recovers after a crash."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
import redis
from pyspark import cloudpickle

from txdag.commit.keyvalue import KVTarget
from txdag.commit.phase import commit_transaction
from txdag.protocol import Committed
from txdag.spark.runner import run_job
from txdag.spark.stateful import stateful
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.state.kv import KVNamespace, StatefulStep, read_as_of, status
from txdag.topology.definition import JobSpec, KeyValue, State, TweetsSource
from txdag.topology.kvstates import namespace, provider_config
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk import TransactionStore

BATCHES = [["a b a", "c"], ["b b", "a d"], ["d", "a a c"]]
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module


class RunningCount(StatefulStep):
    """Storm's WordCountBolt: count each word, emit the running count of the word after each tuple."""

    schema = "word string, count bigint"
    calls: list[str] = []

    def execute(self, row, state, collector):
        count = state.get(row.word, 0) + 1
        state.put(row.word, count)
        collector.emit(row.word, count)

    def pre_prepare(self, txid):
        RunningCount.calls.append(f"pre_prepare {txid}")

    def pre_commit(self, txid):
        RunningCount.calls.append(f"pre_commit {txid}")


def process(batch):
    from pyspark.sql import functions as F

    words = batch.select(F.explode(F.split("value", " ")).alias("word"), "id")
    step = stateful(words, "counts", RunningCount(), key="word", order_by=["id"])
    # the largest running count per word is its total so far: it feeds a map state, summed per txid
    latest = step.emitted.groupBy("word").agg(F.max("count").alias("n")).groupBy().agg(F.sum("n").alias("n"))
    return {"counts": step, "running_sum": latest}


@pytest.fixture
def pipeline(redis_client: redis.Redis, redis_url: str, zk_client, zk_root, prefix):
    tweets = [t for batch in BATCHES for t in batch]
    append_tweets(redis_client, tweets, prefix=f"{prefix}:")
    source = TweetsSource(max_transaction_size=2, prefix=f"{prefix}:")
    states = (State("running_sum", key_fields=0, namespace=f"{prefix}:running_sum"),)
    kv = KeyValue("counts")
    config = provider_config(kv, redis_url)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root),
                              TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=2,
                                                       topology=prefix), max_active_transactions=1)
    target = KVTarget(namespace(kv, prefix, config), config)
    return source, states, kv, config, coordinator, target


def run_txid(spark, redis_client, pipeline, prefix, emission: Emission):
    source, states, kv, config, coordinator, _ = pipeline
    spec = JobSpec(prefix, emission.tx, emission.metadata, source, states, key_values=(kv,))
    run_job(spec, process, {"redis_default": redis_client}, spark, {"counts": config})
    assert coordinator.mark_processed(emission.tx)


def commit(redis_client, pipeline, tx):
    _, states, _, _, coordinator, target = pipeline
    built = {s.name: s.build(redis_client) for s in states}
    return commit_transaction(coordinator, Staging(redis_client, coordinator.name), redis_client, tx, built,
                              key_values={"counts": target}, load_job=lambda: sys.modules[__name__])


def committed_counts(redis_client, ns: KVNamespace) -> dict:
    return read_as_of(redis_client, ns, ["a", "b", "c", "d"], status(redis_client, ns).committed_txid + 1)


def test_a_stateful_step_counts_exactly_through_a_crash_between_prepare_and_commit(
        spark, redis_client, pipeline, prefix, monkeypatch):
    *_, coordinator, target = pipeline
    RunningCount.calls = []
    first = coordinator.coordinate("run1")
    run_txid(spark, redis_client, pipeline, prefix, first)
    assert isinstance(commit(redis_client, pipeline, first.tx), Committed)
    assert committed_counts(redis_client, target.namespace) == {"a": 2, "b": 1, "c": 1}

    second = coordinator.coordinate("run2")
    run_txid(spark, redis_client, pipeline, prefix, second)

    def crash(point, topology, tx):
        if point == "prepared":
            raise SystemExit("killed between prepare and commit")

    monkeypatch.setattr("txdag.commit.keyvalue.crash_if_requested", crash)
    with pytest.raises(SystemExit):
        commit(redis_client, pipeline, second.tx)
    held = status(redis_client, target.namespace)
    assert (held.committed_txid, held.prepared_txid) == (1, 2), "prepared, not committed"
    monkeypatch.undo()
    assert isinstance(commit(redis_client, pipeline, second.tx), Committed)  # recovery commits the prepared txid
    assert committed_counts(redis_client, target.namespace) == {"a": 3, "b": 3, "c": 1, "d": 1}
    assert RunningCount.calls[:3] == ["pre_prepare 1", "pre_commit 1", "pre_prepare 2"]

    third = coordinator.coordinate("run3")
    run_txid(spark, redis_client, pipeline, prefix, third)
    commit(redis_client, pipeline, third.tx)
    truth = Counter(w for batch in BATCHES for tweet in batch for w in tweet.split())
    assert committed_counts(redis_client, target.namespace) == dict(truth)
    # running_sum adds, per txid, the counts of the txid's words after it: 4 (a 2, b 1, c 1), 7 (b 3, a 3, d 1),
    # 9 (d 2, a 5, c 2)
    assert redis_client.hget(f"{prefix}:running_sum", "$GLOBAL$") == b"20"


def test_a_txid_processed_again_after_its_states_commit_reads_the_state_before_it(
        spark, redis_client, pipeline, prefix):
    *_, coordinator, target = pipeline
    first = coordinator.coordinate("run1")
    run_txid(spark, redis_client, pipeline, prefix, first)
    commit(redis_client, pipeline, first.tx)
    second = coordinator.coordinate("run2")
    run_txid(spark, redis_client, pipeline, prefix, second)
    staging = Staging(redis_client, prefix)
    emitted_before = staging.read(second.tx)["running_sum"]
    # the commit stopped after the key-value state was committed: replay txid 2 (attempt 2) from scratch
    from txdag.state.kv import commit as kv_commit
    from txdag.state.kv import prepare as kv_prepare

    kv_prepare(redis_client, target.namespace, second.tx)
    kv_commit(redis_client, target.namespace, second.tx.txid)
    coordinator.fail(second.tx, "commit task lost after the key-value commit")
    again = coordinator.coordinate("run2")
    assert again.tx.attempt == 2
    run_txid(spark, redis_client, pipeline, prefix, again)
    assert staging.read(again.tx)["running_sum"] == emitted_before, "read as of txid 1, not of its own writes"
    assert isinstance(commit(redis_client, pipeline, again.tx), Committed)
    assert committed_counts(redis_client, target.namespace) == {"a": 3, "b": 3, "c": 1, "d": 1}
    assert redis_client.hget(f"{prefix}:running_sum", "$GLOBAL$") == b"11"
