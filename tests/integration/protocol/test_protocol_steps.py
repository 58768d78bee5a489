"""The per-txid steps of txdag.protocol over real Redis and ZooKeeper: each outcome, and the two ways the
in-process runner used to differ from the Airflow tasks (a replaced attempt counted as processed; a commit
before the processing failing the txid and every later one), through LocalTopology's public API.
"""

from collections import Counter

import pytest
from access import ZK_AUTH

from txdag import TransactionAttempt
from txdag.analytics.tweets import STATES, tweet_partials
from txdag.commit.keyvalue import KVTarget
from txdag.errors import StaleAttemptError
from txdag.local import LocalTopology
from txdag.protocol import (
    AlreadyCommitted,
    ClientsRuntime,
    Committed,
    Emission,
    Failed,
    NotReady,
    Processed,
    Refused,
    SourceDown,
    Superseded,
    Wait,
    steps,
)
from txdag.spouts import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    StreamPartition,
    append_entries,
)
from txdag.spouts.samples import sample_sentences, sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.state import OpaqueMap, RedisBackingMap, TransactionalMap
from txdag.txid.coordinator import Coordinator, TransactionStateError
from txdag.zk.client import connect_zk
from txdag.zk.records import TxStatus
from txdag.zk.store import TransactionStore


def tweets_topology(redis_client, zk_hosts, zk_root, prefix, max_active=3) -> LocalTopology:
    append_tweets(redis_client, sample_tweets(120, seed=5), prefix=f"{prefix}:")
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=40, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=max_active)
    states = {name: TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:{name}")) for name in STATES}
    return LocalTopology(coordinator, redis_client, states, lambda recs: tweet_partials(r.value for r in recs))


def statuses(topology: LocalTopology) -> dict[int, TxStatus]:
    return {r.txid: r.status for r in topology.coordinator.status().txids}


def test_process_of_a_replaced_attempt_is_superseded_never_a_count(redis_client, zk_hosts, zk_root, prefix):
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    first = topology.coordinate("run1")
    replaced = topology.coordinate("run1")  # the run was cleared: attempt 2 replaces attempt 1
    assert (first.tx, replaced.tx) == (TransactionAttempt(1, 1), TransactionAttempt(1, 2))
    with pytest.raises(StaleAttemptError, match=rf"topology {prefix!r} txid 1 attempt 1: processed, but the txid "
                                                r"moved on meanwhile"):
        topology.process(first)
    assert statuses(topology) == {1: TxStatus.EMITTED}, "the current attempt is left alone"
    outcome = steps.process(topology.runtime, "run1", first, topology.run_job, owner="run1 local")
    assert isinstance(outcome, Superseded) and outcome.tx == first.tx and "moved on" in outcome.reason
    assert topology.process(replaced) == 40
    assert isinstance(topology.commit(replaced.tx), Committed)


def test_commit_before_process_is_refused_and_fails_nothing(redis_client, zk_hosts, zk_root, prefix):
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    e1, e2 = topology.coordinate("run1"), topology.coordinate("run2")
    with pytest.raises(TransactionStateError, match=r"txid 1 attempt 1 was never processed .* run its process task"):
        topology.commit(e1.tx)
    assert statuses(topology) == {1: TxStatus.EMITTED, 2: TxStatus.EMITTED}, "no txid was failed"
    refused = steps.commit(topology.runtime, e1.tx)
    assert isinstance(refused, Refused) and refused.failed_txid is None and "never processed" in refused.reason
    for emission in (e1, e2):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)
    assert statuses(topology) == {1: TxStatus.COMMITTED, 2: TxStatus.COMMITTED}


def test_commit_outcomes_in_order_cascade_and_replay(redis_client, zk_hosts, zk_root, prefix):
    topology, rt = (t := tweets_topology(redis_client, zk_hosts, zk_root, prefix)), t.runtime
    e1, e2, e3 = (steps.coordinate(rt, f"run{n}") for n in (1, 2, 3))
    for n, emission in ((2, e2), (3, e3)):
        assert isinstance(steps.process(rt, f"run{n}", emission, topology.run_job, owner="t"), Processed)
    waiting = steps.commit(rt, e2.tx)
    assert isinstance(waiting, Wait) and waiting.waiting_on == 1 and "waits for txid 1" in waiting.reason
    failed = steps.fail(rt, "run1", "the job died")
    assert failed == Failed(e1.tx, (1, 2, 3))
    refused = steps.commit(rt, e3.tx)
    assert isinstance(refused, Refused) and refused.failed_txid == 1 and "replay txid 1" in refused.reason
    assert steps.fail(rt, "never-coordinated", "x") is None

    replays = [steps.coordinate(rt, f"run{n}") for n in (1, 2, 3)]  # cleared with their future
    for n, emission in enumerate(replays, 1):
        processed = steps.process(rt, f"run{n}", emission, topology.run_job, owner="t")
        assert isinstance(processed, Processed) and processed.tuples == 40
        committed = steps.commit(rt, emission.tx)
        assert isinstance(committed, Committed) and committed.tx == emission.tx
        assert committed.applied > 0 and committed.skipped == 0
    again = steps.coordinate(rt, "run2")  # a committed txid replayed: nothing to process, a no-op commit
    assert isinstance(again, Emission) and again.already_committed
    assert isinstance(steps.process(rt, "run2", again, topology.run_job, owner="t"), AlreadyCommitted)
    assert isinstance(steps.commit(rt, again.tx), AlreadyCommitted)
    assert isinstance(steps.coordinate(rt, "run4"), NotReady)


def test_a_source_that_is_down_is_an_outcome_and_consumes_no_txid(redis_client, zk_hosts, zk_root, prefix,
                                                                   redis_url, second_redis):
    parts = [StreamPartition.from_url("a", redis_url, f"{prefix}:a", timeout=0.5),
             StreamPartition.from_url("b", second_redis.url, f"{prefix}:b", timeout=0.5)]
    append_entries(parts[0], ["x y"])
    append_entries(parts[1], ["y z"])
    store = TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root)
    rt = ClientsRuntime(Coordinator(store, PartitionedTransactionalStreamSpout(parts, topology=prefix)),
                        redis_client, {})
    second_redis.kill()
    down = steps.coordinate(rt, "run1")
    assert isinstance(down, SourceDown), down
    assert "partition(s) 'b'" in down.reason and "allocates no txid" in down.reason
    assert store.read_topology()[0].last_txid == 0 and store.txid_of_run("run1") is None


def test_a_partial_opaque_batch_names_its_missing_partitions(redis_client, zk_hosts, zk_root, prefix, redis_url,
                                                             second_redis):
    parts = [StreamPartition.from_url("a", redis_url, f"{prefix}:a", timeout=0.5),
             StreamPartition.from_url("b", second_redis.url, f"{prefix}:b", timeout=0.5)]
    sentences = {"a": sample_sentences(6, seed=1), "b": sample_sentences(4, seed=2)}
    for part in parts:
        append_entries(part, sentences[part.name])
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root),
                              OpaquePartitionedStreamSpout(parts, topology=prefix))
    words = OpaqueMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    topology = LocalTopology(coordinator, redis_client, {"words": words},
                             lambda recs: {"words": Counter((w,) for r in recs for w in r.value.split())})
    second_redis.kill()
    partial = topology.coordinate("run1")
    assert isinstance(partial, Emission) and partial.unavailable_partitions == ("b",)
    topology.process(partial)
    topology.commit(partial.tx)
    second_redis.start()
    complete = topology.coordinate("run2")
    assert isinstance(complete, Emission) and complete.unavailable_partitions == ()
    assert complete.metadata["partitions"]["b"]["count"] == 4, "b's entries go into the next batch"


def test_process_waits_for_the_predecessor_when_the_topology_has_key_value_states(
        redis_client, zk_hosts, zk_root, prefix):
    topology = tweets_topology(redis_client, zk_hosts, zk_root, prefix)
    kv = {"counts": KVTarget(None, None)}  # type: ignore[arg-type]  # the step only asks whether there are any
    rt = ClientsRuntime(topology.coordinator, redis_client, topology.states, kv_targets=kv)
    e1, e2 = steps.coordinate(rt, "run1"), steps.coordinate(rt, "run2")
    ran = []

    def job(emission):
        ran.append(emission.tx)
        return topology.run_job(emission)

    waiting = steps.process(rt, "run2", e2, job, owner="t")
    assert isinstance(waiting, Wait) and waiting.waiting_on == 1 and ran == [], "nothing read before txid 1"
    assert isinstance(steps.process(rt, "run1", e1, job, owner="t"), Processed)
    topology.commit(e1.tx)
    assert steps.process(rt, "run2", e2, job, owner="t") == Processed(e2, 40, 0)
    assert ran == [e1.tx, e2.tx]


def test_a_superseded_try_fails_nothing_when_it_ends(redis_client, zk_hosts, zk_root, prefix):
    """Try 1 processes attempt 1 and is given up on; try 2 re-emits the txid (attempt 2) and claims it. When try 1
    finally ends and its failure callback runs, it must not fail attempt 2 (nor the txids behind it)."""
    topology, rt = (t := tweets_topology(redis_client, zk_hosts, zk_root, prefix)), t.runtime
    first = steps.coordinate(rt, "run1")
    assert rt.staging.claim(first.tx, "run1 try 1") == "run1 try 1"
    second = steps.process(rt, "run1", first, topology.run_job, owner="run1 try 2")  # claims attempt 2
    assert isinstance(second, Processed) and second.tx == TransactionAttempt(1, 2)
    stale = steps.fail(rt, "run1", "try 1 died", owner="run1 try 1")
    assert isinstance(stale, Superseded) and "claimed by 'run1 try 2', not by this try (run1 try 1)" in stale.reason
    by_attempt = steps.fail(rt, "run1", "commit of attempt 1 died", attempt=1)
    assert isinstance(by_attempt, Superseded) and "attempt 2 replaced it" in by_attempt.reason
    assert statuses(topology) == {1: TxStatus.PROCESSED}, "attempt 2 goes on"
    assert steps.fail(rt, "run1", "try 2 died", owner="run1 try 2") == Failed(second.tx, (1,))


def test_a_try_that_wakes_up_after_its_retry_does_not_take_the_txid_back(redis_client, zk_hosts, zk_root, prefix):
    """Try 1 is stopped before it claims; try 2 (its retry) claims attempt 1 and goes on. Try 1 wakes up: it must
    not re-emit the txid (that would supersede try 2's attempt): Superseded, the record untouched. A later try (3)
    after a dead try 2 still re-emits, as a retry must."""
    topology, rt = (t := tweets_topology(redis_client, zk_hosts, zk_root, prefix)), t.runtime
    first = steps.coordinate(rt, "run1")
    assert rt.staging.claim(first.tx, "run1 try 2") == "run1 try 2"
    woke = steps.process(rt, "run1", first, topology.run_job, owner="run1 try 1")
    assert isinstance(woke, Superseded) and "a later try ('run1 try 2') holds the txid's current attempt" in woke.reason
    assert topology.coordinator.store.read_txid(1)[0].attempt == 1, "the txid was not re-emitted"
    retried = steps.process(rt, "run1", first, topology.run_job, owner="run1 try 3")  # try 2 died
    assert isinstance(retried, Processed) and retried.tx == TransactionAttempt(1, 2)
