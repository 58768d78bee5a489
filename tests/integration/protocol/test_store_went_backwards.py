"""A state store or a source that went backwards relative to ZooKeeper halts the topology, naming both sides and
the ways out, and changes nothing (issue 20): a Redis that lost its data must never be built on silently."""

import pytest
from test_local_pipeline import Flaky, build, committed_state, truth

from txdag.errors import StoreWentBackwards
from txdag.protocol import Committed
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import append_tweets
from txdag.txid.coordinator import Emission


@pytest.fixture
def tweets(redis_client, prefix):
    data = sample_tweets(120, seed=5)
    append_tweets(redis_client, data, prefix=f"{prefix}:")
    return data


def drain(topology, runs):
    for n in range(runs):
        emission = topology.coordinate(f"run{n}")
        assert isinstance(emission, Emission)
        topology.process(emission, f"run{n}")
        assert isinstance(topology.commit(emission.tx), Committed)


def lose_states(redis_client, prefix):
    """What a Redis restarted without its data shows: no state, no marker (the source kept, to isolate it)."""
    lost = [k for k in redis_client.scan_iter(match=f"{prefix}:*") if not k.decode()[len(prefix) + 1:].isdigit()
            and not k.decode().endswith("NEXT_WRITE")]
    redis_client.delete(*lost)


def test_a_store_that_lost_its_states_halts_the_next_coordinate(redis_client, zk_hosts, zk_root, prefix, tweets):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    drain(topology, 2)  # txids 1, 2 committed: 100 tweets
    lose_states(redis_client, prefix)
    with pytest.raises(StoreWentBackwards) as caught:
        topology.coordinate("run2")
    message = str(caught.value)
    assert "ZooKeeper records txid 2 committed" in message and "no commit marker" in message
    assert f"{prefix}:LAST_COMMITTED" in message and f"txdag reset {prefix} --confirm" in message
    record = topology.coordinator.status().topology
    assert (record.committed_txid, record.last_txid) == (2, 2)  # nothing emitted over the lost store


def test_a_marker_lost_between_coordinate_and_commit_halts_the_commit(redis_client, zk_hosts, zk_root, prefix, tweets):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    drain(topology, 1)
    emission = topology.coordinate("run1")
    topology.process(emission, "run1")
    before = committed_state(redis_client, prefix)
    redis_client.delete(f"{prefix}:LAST_COMMITTED")
    with pytest.raises(StoreWentBackwards, match="ZooKeeper records txid 1 committed"):
        topology.commit(emission.tx)
    assert committed_state(redis_client, prefix) == before  # the halted commit wrote nothing
    assert topology.coordinator.status().topology.committed_txid == 1


def test_a_source_cursor_behind_the_last_batch_halts_instead_of_skipping(
    redis_client, zk_hosts, zk_root, prefix, tweets
):
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    drain(topology, 2)
    assert committed_state(redis_client, prefix) == truth(tweets[:100])
    redis_client.set(f"{prefix}:NEXT_WRITE", 31)  # a source restored from an older backup
    with pytest.raises(StoreWentBackwards) as caught:
        topology.coordinate("run2")
    assert f"key {prefix}:NEXT_WRITE is 31, but the last emitted batch ended at tweet 100" in str(caught.value)
    assert topology.coordinator.status().topology.last_txid == 2


def test_a_marker_one_ahead_is_a_commit_cut_short_and_goes_on(redis_client, zk_hosts, zk_root, prefix, tweets,
                                                              monkeypatch):
    """Txid 2's commit wrote the states and died before its ZooKeeper record: Redis is one ahead of ZooKeeper,
    which shows txid 2's commit begun. Consistent: the runs go on, and the commit run again adds nothing twice."""
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    drain(topology, 1)
    emission = topology.coordinate("run1")
    topology.process(emission, "run1")

    def died(tx):
        raise SystemExit(f"the commit of {tx} died before its ZooKeeper record")

    with monkeypatch.context() as patch:
        patch.setattr(topology.coordinator, "record_commit", died)
        with pytest.raises(SystemExit):
            topology.commit(emission.tx)
    assert redis_client.get(f"{prefix}:LAST_COMMITTED") == b"2"
    assert topology.coordinator.status().topology.committed_txid == 1
    later = topology.coordinate("run2")
    assert isinstance(later, Emission) and later.tx.txid == 3
    assert isinstance(topology.commit(emission.tx), Committed)
    assert committed_state(redis_client, prefix) == truth(tweets[:100])


def test_a_name_reused_over_a_fresh_zookeeper_root_halts_instead_of_skipping_txid_1(
    redis_client, zk_hosts, zk_root, prefix, tweets
):
    """The store holds commit marker 1 of an earlier topology of this name; a new ZooKeeper root would start at
    txid 1 again, and the commit would take the marker for its own and skip the batch. It halts instead."""
    drain(build(redis_client, zk_hosts, zk_root, prefix, Flaky()), 1)
    before = committed_state(redis_client, prefix)
    fresh = build(redis_client, zk_hosts, f"{zk_root}/fresh", prefix, Flaky())
    with pytest.raises(StoreWentBackwards) as caught:
        fresh.coordinate("run0")
    message = str(caught.value)
    assert "holds commit marker 1, but ZooKeeper records only txid 0 committed, and no commit begun of txid 1" \
        in message and f"txdag reset {prefix} --confirm" in message
    assert fresh.coordinator.status().topology.last_txid == 0  # nothing emitted
    assert committed_state(redis_client, prefix) == before


def test_a_marker_at_the_txid_of_a_commit_not_begun_halts_the_commit(redis_client, zk_hosts, zk_root, prefix,
                                                                      tweets):
    """A marker that reaches txid 1 between its coordinate and its commit (another writer of the store, an older
    topology of the name) is not this txid's: the commit halts rather than skip the batch, writing nothing."""
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = topology.coordinate("run0")
    topology.process(emission, "run0")
    redis_client.set(f"{prefix}:LAST_COMMITTED", 1)
    with pytest.raises(StoreWentBackwards, match="no commit begun of txid 1"):
        topology.commit(emission.tx)
    assert committed_state(redis_client, prefix) == {name: {} for name in truth(tweets[:1])}
    assert topology.coordinator.status().topology.committed_txid == 0


def test_a_marker_that_appears_during_the_commit_halts_it_and_a_retry_halts_too(redis_client, zk_hosts, zk_root,
                                                                                prefix, tweets, monkeypatch):
    """Another writer sets the marker to txid 1 after the commit's first check and its COMMITTING: the commit halts
    and takes its COMMITTING back, so that a retry does not take that marker for txid 1's own and skip the batch."""
    topology = build(redis_client, zk_hosts, zk_root, prefix, Flaky())
    emission = topology.coordinate("run0")
    topology.process(emission, "run0")
    begin = topology.coordinator.begin_commit

    def begin_then_another_writer(tx):
        decision = begin(tx)
        redis_client.set(f"{prefix}:LAST_COMMITTED", 1)
        return decision

    with monkeypatch.context() as patch:
        patch.setattr(topology.coordinator, "begin_commit", begin_then_another_writer)
        with pytest.raises(StoreWentBackwards, match="no commit begun of txid 1"):
            topology.commit(emission.tx)
    record = topology.coordinator.store.read_txid(1)[0]
    assert (record.status.value, record.commit_begun) == ("processed", False)
    with pytest.raises(StoreWentBackwards, match="no commit begun of txid 1"):
        topology.commit(emission.tx)  # the retry: halted again, nothing skipped
    assert committed_state(redis_client, prefix) == {name: {} for name in truth(tweets[:1])}
