"""Trident's state updates through the real pipeline (Spark job, Redis staging, ZooKeeper txids, the commit):
persistentAggregate with every aggregator kind into transactional, opaque and global states, partitionPersist
with its new values stream, exact through a retried attempt and a commit that dies half way."""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

from txdag import trident as td
from txdag.commit.newvalues import values_key
from txdag.commit.phase import commit_transaction
from txdag.commit.rejections import list_rejections
from txdag.protocol import Committed
from txdag.spark.runner import run_job
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.store import Staging
from txdag.state import OpaqueValue, RedisBackingMap, TransactionalValue
from txdag.topology.definition import JobSpec, State, TweetsSource
from txdag.txid.coordinator import Coordinator
from txdag.zk import TransactionStore

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
BATCHES = [["storm spark", "airflow storm"], ["redis zookeeper storm", "spark"], ["sparkling airflow", "st"]]


class MeanLength(td.CombinerAggregator):
    """(total, n) of word lengths: a struct partial, merged by the commit with combine."""

    schema = "mean struct<total: bigint, n: bigint>"

    def init(self, row):
        return {"total": len(row["word"]), "n": 1}

    def combine(self, a, b):
        return {"total": a["total"] + b["total"], "n": a["n"] + b["n"]}

    def zero(self):
        return {"total": 0, "n": 0}


class LongestWord(td.ReducerAggregator):
    """The longest word per first letter (ties: the smaller word): folded row by row, also at the commit."""

    schema = "longest string"

    def init(self):
        return ""

    def reduce(self, current, row):
        return max(current, row["word"], key=lambda w: (len(w), [-ord(c) for c in w]))


class LastSeen(td.StateUpdater):
    """Seed 004's LocationUpdater: puts each word's last tweet id, emits the word and the id."""

    def update_state(self, state, rows, collector):
        latest = {}
        for row in rows:
            latest[row["word"]] = max(latest.get(row["word"], 0), int(row["id"]))
        state.multi_put([(w,) for w in latest], list(latest.values()))
        for word, tweet in sorted(latest.items()):
            collector.emit(word, tweet)


def process(batch):
    words = batch.select("id", F.explode(F.split("value", " ")).alias("word"))
    letters = words.select(F.substring("word", 1, 1).alias("letter"), "word")
    return {
        "counts": td.group_by(words, "word").persistent_aggregate(td.Count()),
        "longest_len": td.group_by(letters.select("letter", F.length("word").alias("n")), "letter")
        .persistent_aggregate(td.Max("n"), new_values=True),
        "mean_length": td.group_by(words, "word").persistent_aggregate(MeanLength(), "word"),
        "longest": td.group_by(letters, "letter").persistent_aggregate(LongestWord(), "word"),
        "total": td.persistent_aggregate(words, td.Count()),
        "last_seen": td.partition_persist(words, LastSeen(), new_values=True),
    }


STATES = {"counts": {}, "longest_len": {"kind": "opaque"}, "mean_length": {}, "longest": {"kind": "opaque"},
          "total": {"key_fields": 0}, "last_seen": {}}


@pytest.fixture
def topology(redis_client, zk_client, zk_root, prefix):
    append_tweets(redis_client, [t for batch in BATCHES for t in batch], prefix=f"{prefix}:")
    source = TweetsSource(max_transaction_size=2, prefix=f"{prefix}:")
    states = tuple(State(name, namespace=f"{prefix}:{name}", **opts) for name, opts in STATES.items())
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=2, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=2)
    return source, states, coordinator


def process_txid(spark, redis_client, topology, prefix, emission):
    source, states, coordinator = topology
    spec = JobSpec(prefix, emission.tx, emission.metadata, source, states)
    run_job(spec, process, {"redis_default": redis_client}, spark)
    assert coordinator.mark_processed(emission.tx)


def commit(redis_client, topology, tx):
    _, states, coordinator = topology
    built = {s.name: s.build(redis_client) for s in states}
    return commit_transaction(coordinator, Staging(redis_client, coordinator.name), redis_client, tx, built,
                              load_job=lambda: sys.modules[__name__])


def stored(redis_client, prefix, state):
    backing = RedisBackingMap(redis_client, f"{prefix}:{state}")
    fields = [f.decode() for f in redis_client.hkeys(f"{prefix}:{state}")]
    values = backing.multi_get([backing.key_codec.decode(f) for f in fields])
    unwrap = {OpaqueValue: lambda v: v.curr, TransactionalValue: lambda v: v.value}
    return {f: unwrap[type(v)](v) for f, v in zip(fields, values)}


def truth():
    words = [(i, w) for i, t in enumerate([t for b in BATCHES for t in b], start=1) for w in t.split()]
    by_letter = defaultdict(list)
    for _, w in words:
        by_letter[w[0]].append(w)
    lengths = defaultdict(list)
    for _, w in words:
        lengths[w].append(len(w))
    return {
        "counts": dict(Counter(w for _, w in words)),
        "longest_len": {k: max(len(w) for w in v) for k, v in by_letter.items()},
        "mean_length": {w: {"total": sum(v), "n": len(v)} for w, v in lengths.items()},
        "longest": {k: max(v, key=lambda w: (len(w), [-ord(c) for c in w])) for k, v in by_letter.items()},
        "total": {"$GLOBAL$": len(words)},
        "last_seen": {w: max(i for i, x in words if x == w) for _, w in words},
    }


def test_every_update_kind_is_exact_through_a_retried_attempt_and_a_commit_dying_half_way(
        spark, redis_client, topology, prefix, monkeypatch):
    *_, coordinator = topology
    one, two = coordinator.coordinate("r1"), coordinator.coordinate("r2")
    process_txid(spark, redis_client, topology, prefix, two)  # processed out of order: only commits are ordered
    process_txid(spark, redis_client, topology, prefix, one)
    assert isinstance(commit(redis_client, topology, one.tx), Committed)
    coordinator.fail(two.tx, "process task lost")  # txid 2 is processed again (attempt 2, the same batch)
    two = coordinator.coordinate("r2")
    assert two.tx.attempt == 2
    process_txid(spark, redis_client, topology, prefix, two)

    def die(point, topology_id, tx):
        if point == "commit":
            raise SystemExit("killed after the states were written")

    monkeypatch.setattr("txdag.commit.phase.crash_if_requested", die)
    with pytest.raises(SystemExit):
        commit(redis_client, topology, two.tx)
    monkeypatch.undo()
    assert isinstance(commit(redis_client, topology, two.tx), Committed)  # the rerun changes nothing twice
    three = coordinator.coordinate("r3")
    process_txid(spark, redis_client, topology, prefix, three)
    commit(redis_client, topology, three.tx)

    expected = truth()
    for state in STATES:
        assert stored(redis_client, prefix, state) == {str(k): v for k, v in expected[state].items()}, state
    entries = redis_client.xrange(values_key(prefix, "last_seen"))
    assert [e[0].decode().split("-")[0] for e in entries] == ["1", "1", "1", "2", "2", "2", "2", "3", "3", "3"]
    assert json.loads(entries[-1][1][b"value"]) == ["st", 6]
    by_txid = defaultdict(list)
    for entry_id, fields in redis_client.xrange(values_key(prefix, "longest_len")):
        by_txid[int(entry_id.decode().split("-")[0])].append(json.loads(fields[b"value"]))
    # the updated keys of each txid with their new values; txid 2's once, although its commit ran twice
    assert {t: sorted(v) for t, v in by_txid.items()} == {
        1: [["a", 7], ["s", 5]], 2: [["r", 5], ["s", 5], ["z", 9]], 3: [["a", 7], ["s", 9]]}


def test_state_query_inside_a_job_reads_where_the_jobs_states_are(spark, redis_client, topology, prefix):
    """No redis_url: inside a txdag job (spark-submit or warm mode alike) the query reads the job's Redis."""
    source, states, coordinator = topology
    counts = State("counts", namespace=f"{prefix}:counts")
    known = counts.build(redis_client)
    known.begin_commit(1)
    known.multi_put([("storm",), ("spark",)], [7, 2])
    known.commit(1)
    seen = State("seen", key_fields=0, namespace=f"{prefix}:seen")

    def lookup(batch):
        words = batch.select(F.explode(F.split("value", " ")).alias("word"))
        found = td.state_query(words, counts, td.MapGet("known bigint"), key_fields=["word"])
        return {"seen": found.where(F.col("known").isNotNull()).groupBy().agg(F.sum("known"))}

    emission = coordinator.coordinate("r1")  # tweets 1-2: "storm spark", "airflow storm"
    spec = JobSpec(prefix, emission.tx, emission.metadata, source, (seen,))
    run_job(spec, lookup, {"redis_default": redis_client}, spark)
    assert Staging(redis_client, prefix).read(emission.tx) == {"seen": {"$GLOBAL$": 7 + 2 + 7}}


def pairs_process(batch):
    parts = F.split("value", " ")
    pairs = batch.select(parts[0].alias("first"), parts[1].alias("second"), parts[1].alias("word"))
    grouped = td.group_by(pairs, "first", "second")
    return {"pair_counts": grouped.persistent_aggregate(td.Count()),
            "pair_means": grouped.persistent_aggregate(MeanLength(), "word"),
            "pair_longest": grouped.persistent_aggregate(LongestWord(), "word")}


def test_a_joined_key_whose_first_field_holds_the_separator_is_rejected_by_every_update_kind(
        spark, redis_client, zk_client, zk_root, prefix):
    """("a:b", "c") would be stored as "a:b:c", the field of ("a", "b:c"): numeric partials and combiner partials
    leave it out in the job, a reducer's rows at the commit; each is a rejection naming the state and the txid."""
    append_tweets(redis_client, ["a:b c", "a b:c", "x y"], prefix=f"{prefix}:")
    names = ("pair_counts", "pair_means", "pair_longest")
    states = tuple(State(n, namespace=f"{prefix}:{n}", key_fields=2, separator=":") for n in names)
    source = TweetsSource(max_transaction_size=3, prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=1)
    emission = coordinator.coordinate("r1")
    run_job(JobSpec(prefix, emission.tx, emission.metadata, source, states), pairs_process,
            {"redis_default": redis_client}, spark)
    assert coordinator.mark_processed(emission.tx)
    built = {s.name: s.build(redis_client) for s in states}
    outcome = commit_transaction(coordinator, Staging(redis_client, prefix), redis_client, emission.tx, built,
                                 load_job=lambda: sys.modules[__name__])
    assert isinstance(outcome, Committed), outcome
    assert stored(redis_client, prefix, "pair_counts") == {"a:b:c": 1, "x:y": 1}
    assert stored(redis_client, prefix, "pair_means") == {"a:b:c": {"total": 3, "n": 1}, "x:y": {"total": 1, "n": 1}}
    assert stored(redis_client, prefix, "pair_longest") == {"a:b:c": "b:c", "x:y": "y"}
    rejected = list_rejections(redis_client, prefix)
    assert sorted(rejected) == [f'key:{n}:1:["a:b","c"]' for n in sorted(names)]
    for n in names:
        assert rejected[f'key:{n}:1:["a:b","c"]']["reason"].startswith(
            f"state {n!r} txid 1: key field 0 'a:b' of ('a:b', 'c') contains the separator ':'")


def test_a_separator_of_two_characters_refuses_a_first_field_ending_with_its_start(
        spark, redis_client, zk_client, zk_root, prefix):
    """With "::", ("a:", "c") would be stored as "a:::c", the field of ("a", ":c"): the job's Spark expression
    refuses it as the codec does, and keeps ("a", "b::c") (the last field may hold the separator)."""
    append_tweets(redis_client, ["a: c", "a b::c", "x y"], prefix=f"{prefix}:")
    state = State("pair_counts", namespace=f"{prefix}:pair_counts", key_fields=2, separator="::")
    source = TweetsSource(max_transaction_size=3, prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=1)
    emission = coordinator.coordinate("r1")
    run_job(JobSpec(prefix, emission.tx, emission.metadata, source, (state,)),
            lambda batch: {"pair_counts": pairs_process(batch)["pair_counts"]}, {"redis_default": redis_client}, spark)
    assert Staging(redis_client, prefix).read(emission.tx) == {"pair_counts": {"a::b::c": 1, "x::y": 1}}
    rejected = list_rejections(redis_client, prefix)
    assert list(rejected) == ['key:pair_counts:1:["a:","c"]']
    assert "ends with the start of the separator '::'" in rejected['key:pair_counts:1:["a:","c"]']["reason"]


class PairSeen(td.StateUpdater):
    """Counts each (first, second) pair by reading and writing the state itself, as a user's updater does."""

    def update_state(self, state, rows, collector):
        keys = sorted({(row["first"], row["second"]) for row in rows})
        stored = state.multi_get(keys)
        state.multi_put(keys, [(s or 0) + sum((r["first"], r["second"]) == k for r in rows)
                               for k, s in zip(keys, stored)])
        collector.emit(len(keys))


def test_a_state_updater_writing_a_refused_key_commits_its_other_keys_and_records_the_rejection(
        spark, redis_client, zk_client, zk_root, prefix):
    """A StateUpdater's multi_get/multi_put of ("a:b", "c") (stored as "a:b:c", the field of ("a", "b:c")) reads no
    value and writes nothing; the commit goes on with the other keys and records the key as a rejection."""
    append_tweets(redis_client, ["a:b c", "a b:c", "x y"], prefix=f"{prefix}:")
    state = State("pairs", namespace=f"{prefix}:pairs", key_fields=2, separator=":")
    source = TweetsSource(max_transaction_size=3, prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=3, topology=prefix)
    coordinator = Coordinator(TransactionStore(zk_client, prefix, root=zk_root), spout, max_active_transactions=1)
    emission = coordinator.coordinate("r1")

    def pairs_seen(batch):
        parts = F.split("value", " ")
        return {"pairs": td.partition_persist(batch.select(parts[0].alias("first"), parts[1].alias("second")),
                                              PairSeen())}

    run_job(JobSpec(prefix, emission.tx, emission.metadata, source, (state,)), pairs_seen,
            {"redis_default": redis_client}, spark)
    assert coordinator.mark_processed(emission.tx)
    outcome = commit_transaction(coordinator, Staging(redis_client, prefix), redis_client, emission.tx,
                                 {"pairs": state.build(redis_client)}, load_job=lambda: sys.modules[__name__])
    assert isinstance(outcome, Committed), outcome
    assert stored(redis_client, prefix, "pairs") == {"a:b:c": 1, "x:y": 1}
    rejected = list_rejections(redis_client, prefix)
    assert list(rejected) == ['key:pairs:1:["a:b","c"]']
    assert rejected['key:pairs:1:["a:b","c"]']["reason"].startswith(
        "state 'pairs' txid 1: key field 0 'a:b' of ('a:b', 'c') contains the separator ':'")
