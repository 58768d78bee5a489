"""Windows over batches (seed 001) through the real pipeline: a Spark job stages each batch's window rows, the
commit appends them to the window store in Redis in txid order and aggregates the windows they close.

Replays in the middle of a window: a txid processed twice, a commit that dies after the window append and is
run again (it fires exactly the windows it fired the first time), a committed txid cleared and replayed."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

from txdag import trident as td
from txdag.commit.newvalues import values_key
from txdag.commit.phase import commit_transaction
from txdag.commit.rejections import list_rejections
from txdag.protocol import AlreadyCommitted, Committed
from txdag.spark.runner import run_job
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.topology.definition import JobSpec, State, TweetsSource
from txdag.txid.coordinator import Coordinator
from txdag.windows.store import WindowStore
from txdag.zk import TransactionStore

cloudpickle.register_pickle_by_value(sys.modules[__name__])

TWEETS = ["#a #b", "#a", "", "#c #a", "#b", "#b #c", "#c", "#d", "#a #d", "#d #c"]  # two per batch: 5 txids
TRENDING = td.SlidingBatchWindow(size=3)


def hashtags(batch):
    words = batch.select("id", F.explode(F.split("value", " ")).alias("tag"))
    return words.where(F.col("tag").startswith("#")).select("tag", F.col("id").cast("long").alias("id"))


def process(batch):
    tags = hashtags(batch)
    return {
        "trending": td.window(tags.select("tag"), TRENDING, td.Count(), group_by=["tag"], top=2, new_values=True),
        "per_four": td.window(tags.orderBy("id").select("id"), td.TumblingCountWindow(4), td.Count()),
        "by_time": td.window(tags, td.TumblingDurationWindow(4), td.Count(), group_by=["tag"], timestamp="id"),
    }


STATES = ("trending", "per_four", "by_time")


@pytest.fixture
def topology(redis_client, zk_client, zk_root, prefix):
    append_tweets(redis_client, TWEETS, prefix=f"{prefix}:")
    source = TweetsSource(max_transaction_size=2, prefix=f"{prefix}:")
    states = tuple(State(name, key_fields=0, namespace=f"{prefix}:{name}") for name in STATES)
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=2, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=2)
    return source, states, coordinator


def run(spark, redis_client, topology, prefix, run_id):
    source, states, coordinator = topology
    emission = coordinator.coordinate(run_id)
    spec = JobSpec(prefix, emission.tx, emission.metadata, source, states)
    run_job(spec, process, {"redis_default": redis_client}, spark)
    coordinator.mark_processed(emission.tx)
    return emission


def commit(redis_client, topology, tx):
    _, states, coordinator = topology
    built = {s.name: s.build(redis_client) for s in states}
    return commit_transaction(coordinator, Staging(redis_client, coordinator.name), redis_client, tx, built,
                              load_job=lambda: sys.modules[__name__])


def latest(redis_client, prefix, state):
    raw = redis_client.hget(f"{prefix}:{state}", "$GLOBAL$")
    return None if raw is None else json.loads(raw)


def top_two(tweets):
    counts = Counter(t for tweet in tweets for t in tweet.split())
    return sorted(([t, n] for t, n in counts.items()), key=lambda r: (-r[1], r[0]))[:2]


def test_windows_fire_the_same_windows_through_replays_in_the_middle(spark, redis_client, topology, prefix,
                                                                     monkeypatch):
    *_, coordinator = topology
    one = run(spark, redis_client, topology, prefix, "r1")
    commit(redis_client, topology, one.tx)
    assert latest(redis_client, prefix, "trending")["rows"] == top_two(TWEETS[0:2])
    assert latest(redis_client, prefix, "per_four") is None  # no window closed yet: the state is left alone
    assert latest(redis_client, prefix, "by_time") is None

    two = run(spark, redis_client, topology, prefix, "r2")
    coordinator.fail(two.tx, "process task lost")  # processed again: attempt 2, the same batch
    two = run(spark, redis_client, topology, prefix, "r2")
    commit(redis_client, topology, two.tx)
    three = run(spark, redis_client, topology, prefix, "r3")

    def die(point, topology_id, tx):
        if point == "commit":
            raise SystemExit("killed after the windows were appended")

    monkeypatch.setattr("txdag.commit.phase.crash_if_requested", die)
    with pytest.raises(SystemExit):
        commit(redis_client, topology, three.tx)
    store = WindowStore(redis_client, prefix, "trending", TRENDING)
    fired_first = store.fired(3)
    monkeypatch.undo()
    assert isinstance(commit(redis_client, topology, three.tx), Committed)
    assert store.fired(3) == fired_first and [f.id for f in fired_first] == [3]
    assert latest(redis_client, prefix, "trending")["rows"] == top_two(TWEETS[0:6])

    four = run(spark, redis_client, topology, prefix, "r4")
    commit(redis_client, topology, four.tx)
    replay = coordinator.coordinate("r2")  # a committed run cleared: its txid is replayed, its commit a no-op
    assert replay.already_committed
    assert isinstance(commit(redis_client, topology, replay.tx), AlreadyCommitted)
    five = run(spark, redis_client, topology, prefix, "r5")
    commit(redis_client, topology, five.tx)

    trending = latest(redis_client, prefix, "trending")
    assert (trending["id"], trending["start"], trending["end"]) == (5, 3, 5)
    assert trending["rows"] == top_two(TWEETS[4:10])
    entries = redis_client.xrange(values_key(prefix, "trending"))
    assert [e[0].decode() for e in entries] == ["1-1", "2-1", "3-1", "4-1", "5-1"]  # one window per txid, once
    tag_ids = [(int(i), t) for i, tweet in enumerate(TWEETS, start=1) for t in tweet.split()]
    # per_four: windows of 4 hashtags in id order: 14 hashtags close 3 of them
    per_four = WindowStore(redis_client, prefix, "per_four", td.TumblingCountWindow(4))
    fired = [f for t in range(1, 6) for f in per_four.fired(t)]
    assert len(tag_ids) == 14
    assert [(f.start, f.end, f.rows) for f in fired] == [(1, 4, [[4]]), (5, 8, [[4]]), (9, 12, [[4]])]
    # by_time: ids as seconds, windows [0, 4), [4, 8): closed when a later id passes their end
    by_time = WindowStore(redis_client, prefix, "by_time", td.TumblingDurationWindow(4))
    closed = {(f.start, f.end): sorted(map(tuple, f.rows)) for t in range(1, 6) for f in by_time.fired(t)}
    expected = {}
    for start in (0, 4, 8):
        inside = Counter(t for i, t in tag_ids if start <= i < start + 4)
        if inside and start + 4 <= 10:
            expected[(start, start + 4)] = sorted(inside.items())
    assert closed == expected
    assert list_rejections(redis_client, prefix) == {}, "ids grow with txids: nothing is late"
