"""Sinks (Storm's committer bolts) through the real pipeline: the Spark job stages a txid's rows for a sink, and the
commit hands them to the examples' JsonLinesSink, written from its docs alone, strictly in txid order; a commit that
dies after the sink took the rows is completed by its rerun without a second copy, a sink behind by more than one
txid halts the commit naming the txids, and what a committer raises keeps its class, with a note naming the sink."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F
from support.examples import example_module

from txdag import TransactionAttempt
from txdag import trident as td
from txdag.commit.phase import commit_transaction
from txdag.errors import StoreWentBackwards
from txdag.protocol import Committed, Wait
from txdag.spark.runner import run_job
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, Sink, State, TweetsSource
from txdag.txid.coordinator import Coordinator
from txdag.zk import TransactionStore

pytestmark = pytest.mark.integration


JsonLinesSink = example_module("jsonl_sink").JsonLinesSink  # found by the commit here, as in a job importing it
cloudpickle.register_pickle_by_value(sys.modules[__name__])
FOLDER: list[str] = []  # the test's sink folder, read by process (a job function takes the batch alone)


class Refuses(td.Committer):
    """A sink whose commit raises, as a database that refuses a row would."""

    def last_applied(self):
        return None

    def commit(self, tx, rows):
        raise ValueError(f"row {rows[0]['id']} refused")


def process(batch):
    words = batch.select("id", F.explode(F.split("value", " ")).alias("word"))
    return {"words": td.group_by(words, "word").persistent_aggregate(td.Count()),
            "audit": td.commit_to(words, JsonLinesSink(FOLDER[0]))}


def failing(batch):
    return {"audit": td.commit_to(batch.select("id"), Refuses())}


@pytest.fixture
def pipeline(spark, redis_client, zk_client, zk_root, prefix, tmp_path):
    FOLDER[:] = [str(tmp_path / "sink")]
    append_tweets(redis_client, ["storm spark", "airflow storm", "redis", "kafka storm"], prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=2, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=2)
    words = State("words", namespace=f"{prefix}:words")
    source = TweetsSource(max_transaction_size=2, prefix=f"{prefix}:")

    def run(emission, job=process):
        run_job(JobSpec(prefix, emission.tx, emission.metadata, source, (words,), sinks=(Sink("audit"),)), job,
                {"redis_default": redis_client}, spark)
        assert coordinator.mark_processed(emission.tx)

    def commit(tx):
        return commit_transaction(coordinator, Staging(redis_client, prefix), redis_client, tx,
                                  {"words": words.build(redis_client)}, load_job=lambda: sys.modules[__name__],
                                  sinks=["audit"])

    return coordinator, run, commit, Path(FOLDER[0])


def files(folder):
    return {p.name: [tuple(row) for row in map(json.loads, p.read_text().splitlines())]
            for p in sorted(folder.glob("txid-*.jsonl"))}


def test_a_sink_gets_each_txids_rows_in_txid_order_once_through_a_commit_that_dies_after_it(pipeline, monkeypatch):
    coordinator, run, commit, folder = pipeline
    one, two = coordinator.coordinate("r1"), coordinator.coordinate("r2")
    run(two)  # processed out of order: only commits are ordered
    run(one)
    assert isinstance(commit(two.tx), Wait) and not folder.exists(), "txid 2 waits for txid 1; the sink too"
    assert isinstance(commit(one.tx), Committed)

    def die(point, topology_id, tx):
        if point == "commit":
            raise SystemExit("killed after the sink and the states were written")

    monkeypatch.setattr("txdag.commit.phase.crash_if_requested", die)
    with pytest.raises(SystemExit):
        commit(two.tx)
    monkeypatch.undo()
    assert isinstance(commit(two.tx), Committed)  # the rerun: the sink holds txid 2 attempt 1, not called again
    assert files(folder) == {
        "txid-1-1.jsonl": [("1", "storm"), ("1", "spark"), ("2", "airflow"), ("2", "storm")],  # a batch's ids: text
        "txid-2-1.jsonl": [("3", "redis"), ("4", "kafka"), ("4", "storm")],
    }
    assert JsonLinesSink(str(folder)).last_applied() == TransactionAttempt(2, 1)


def test_a_sink_behind_by_more_than_one_txid_halts_the_commit_naming_the_txids(pipeline, redis_client, prefix):
    coordinator, run, commit, folder = pipeline
    append_tweets(redis_client, ["flink", "beam"], prefix=f"{prefix}:")
    for n in (1, 2):
        emission = coordinator.coordinate(f"r{n}")
        run(emission)
        assert isinstance(commit(emission.tx), Committed)
    three = coordinator.coordinate("r3")
    run(three)
    (folder / "txid-2-1.jsonl").unlink()  # as if restored from a copy older than txid 2's commit
    with pytest.raises(StoreWentBackwards, match=r"sink 'audit' \(JsonLinesSink\): the sink holds txid 1 last, so "
                                                 r"txids 2 to 2, committed, are missing from it"):
        commit(three.tx)
    assert sorted(p.name for p in folder.glob("txid-*")) == ["txid-1-1.jsonl"]
    words = {k.decode() for k in redis_client.hkeys(f"{prefix}:words")}
    assert words and not words & {"flink", "beam"}, "the halted commit wrote txid 3 into the state"
    assert not coordinator.store.read_txid(3)[0].commit_begun, "its COMMITTING must not vouch for a retry"


def test_a_sink_ahead_of_the_commit_halts_it_as_after_a_reset_that_left_the_sink(pipeline, redis_client, prefix):
    coordinator, run, commit, folder = pipeline
    one = coordinator.coordinate("r1")
    run(one)
    folder.mkdir()
    (folder / "txid-7-1.jsonl").write_text("")  # a sink kept from before the topology started over at txid 1
    with pytest.raises(StoreWentBackwards, match=r"sink 'audit' \(JsonLinesSink\): the sink holds txid 7, ahead of "
                                                 r"this commit: the topology was started over"):
        commit(one.tx)
    assert sorted(p.name for p in folder.iterdir()) == ["txid-7-1.jsonl"]
    assert redis_client.hlen(f"{prefix}:words") == 0, "the halted commit wrote the state before it read the sink"


def test_what_a_committer_raises_keeps_its_class_with_a_note_naming_the_sink(pipeline):
    coordinator, run, commit, _ = pipeline
    one = coordinator.coordinate("r1")
    run(one, failing)
    with pytest.raises(ValueError, match="row 1 refused") as raised:
        commit(one.tx)
    assert any("sink 'audit' (Refuses): raised by the committer's commit()" in note
               for note in raised.value.__notes__), raised.value.__notes__
