"""Map states on a real Redis Cluster (three masters): every script call touches one hash slot, and a commit that
spans slots and dies between them is completed by its replay, exactly once.

The staging and the marker are in the topology's slot (``{topology}``); a state's keys in its namespace's. States
in slots of their own are read page by page by the commit and applied in their slot; states whose namespace
carries the topology's hash tag are committed inside Redis, as on one server.
"""

import pytest
from access import ZK_AUTH
from redis.crc import key_slot

from txdag.analytics.tweets import STATES, tweet_partials
from txdag.attempt import TransactionAttempt
from txdag.errors import TxidOrderError
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts.samples import sample_tweets
from txdag.spouts.tweets import TweetsTransactionalSpout, append_tweets
from txdag.staging.layout import stage_key
from txdag.state import (
    JoinedKeyCodec,
    NonTransactionalMap,
    OpaqueMap,
    RedisBackingMap,
    TransactionalMap,
    apply_partials,
    combine_sum,
)
from txdag.state.committed import read_committed
from txdag.state.keys import DEFAULT_KEY_CODEC
from txdag.state.kv import make_client, parse_provider_config
from txdag.state.marker import default_key
from txdag.state.redis_backing import state_keys
from txdag.state.redis_commit import one_slot
from txdag.txid.coordinator import Coordinator
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

KINDS = {"users": TransactionalMap, "hashtags": OpaqueMap, "users_hashtags": TransactionalMap}
CODECS = {"users_hashtags": JoinedKeyCodec(":", 2)}


@pytest.fixture
def cluster_client(redis_cluster, prefix):
    client = make_client(parse_provider_config("redis_cluster", redis_cluster.config()))
    yield client
    for key in list(client.scan_iter(match=f"*{prefix}*", count=1000)):
        client.delete(key)
    client.close()


def slot(key):
    return key_slot(key.encode())


def namespaces(prefix, colocated):
    """Each state's namespace: in a slot of its own, or carrying the topology's hash tag."""
    return {name: f"{{{prefix}}}:{name}" if colocated else f"{prefix}:{name}" for name in STATES}


def build(cluster_client, redis_client, zk_hosts, zk_root, prefix, names, order):
    spout = TweetsTransactionalSpout(redis_client, prefix=f"{prefix}:", max_transaction_size=50, topology=prefix)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=2)
    states = {name: KINDS[name](RedisBackingMap(cluster_client, names[name],
                                                key_codec=CODECS.get(name, DEFAULT_KEY_CODEC)))
              for name in order}

    def process(records):
        partials = tweet_partials(r.value for r in records)
        return {name: partials[name] for name in order}  # the order the commit applies them in

    return LocalTopology(coordinator, cluster_client, states, process)


def committed(cluster_client, names):
    out = {}
    for name, namespace in names.items():
        codec = CODECS.get(name, DEFAULT_KEY_CODEC)
        out[name] = {codec.decode(k.decode()): int(v) for k, v in cluster_client.hgetall(namespace).items()}
    return out


def as_of_marker(cluster_client, prefix, names):
    """Every state as txdag.state.committed reads it: values as of the commit marker's txid."""
    out = {}
    for name, namespace in names.items():
        read = read_committed(RedisBackingMap(cluster_client, namespace), default_key(prefix), prefix)
        out[name] = {field: value.value for field, value in read.values.items()}
    return out


def held_txids(cluster_client, namespace):
    return {int(t) for t in cluster_client.hvals(state_keys(namespace)[1])}


@pytest.mark.parametrize("colocated", [False, True], ids=["own-slots", "topology-slot"])
@pytest.mark.parametrize("first", ["hashtags", "users"], ids=["opaque-first", "transactional-first"])
def test_a_commit_that_dies_between_slots_is_completed_by_its_replay(
    cluster_client, redis_client, zk_hosts, zk_root, prefix, monkeypatch, colocated, first
):
    tweets = sample_tweets(230, seed=11)
    append_tweets(redis_client, tweets, prefix=f"{prefix}:")
    names = namespaces(prefix, colocated)
    order = [first, *(n for n in STATES if n != first)]
    topology = build(cluster_client, redis_client, zk_hosts, zk_root, prefix, names, order)
    staging_slot = slot(stage_key(prefix, TransactionAttempt(2, 1)))
    slots = {name: slot(ns) for name, ns in names.items()}
    if colocated:
        assert set(slots.values()) == {staging_slot}
    else:
        assert len({*slots.values(), staging_slot}) == 4, f"the test needs four slots, got {slots} {staging_slot}"
    assert all(one_slot(cluster_client, state_keys(ns)) for ns in names.values())

    def crash(point, name, tx):
        if point == "applying" and (tx.txid, tx.attempt) == (2, 1):
            raise RuntimeError("killed between the first state and the rest")

    monkeypatch.setattr("txdag.commit.apply.crash_if_requested", crash)
    first_run = topology.coordinate("run1")
    topology.process(first_run)
    staged = sum(len(f) + len(v) for name in names
                 for f, v in cluster_client.hgetall(stage_key(prefix, first_run.tx, name)).items())
    committed_first = topology.commit(first_run.tx)  # each page read here, applied in the state's slot: counted here
    assert isinstance(committed_first, Committed) and committed_first.staged_bytes == staged > 0, committed_first
    after_first = as_of_marker(cluster_client, prefix, names)
    second = topology.coordinate("run2")
    topology.process(second)
    with pytest.raises(RuntimeError, match="killed between"):
        topology.commit(second.tx)

    assert held_txids(cluster_client, names[first]) == {1, 2}, "the first state's slot holds txid 2"
    for other in order[1:]:
        assert held_txids(cluster_client, names[other]) == {1}, f"{other!r} was not reached"
    assert cluster_client.get(default_key(prefix)) == b"1", "the marker is written after every state"
    assert as_of_marker(cluster_client, prefix, names) == after_first, "a reader sees txid 1, none of txid 2"

    replay = topology.coordinate("run2")
    assert (replay.tx.txid, replay.tx.attempt) == (2, 2)
    topology.process(replay)
    outcome = topology.commit(replay.tx)
    assert isinstance(outcome, Committed)
    assert (outcome.skipped > 0) == (first == "users"), "a transactional key that holds txid 2 is skipped"
    topology.drain(run_prefix="more")

    assert committed(cluster_client, names) == {n: dict(c) for n, c in tweet_partials(tweets).items()}
    status = topology.coordinator.status()
    assert status.topology.committed_txid == 5 and cluster_client.get(default_key(prefix)) == b"5"
    assert not list(cluster_client.scan_iter(match=f"txdag:stage:{{{prefix}}}:*")), "staging cleaned up"


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap, NonTransactionalMap])
def test_partials_across_slots_match_the_python_map_state_and_replays_are_no_ops(cluster_client, prefix, kind):
    marker = default_key(prefix)
    by_script = [kind(RedisBackingMap(cluster_client, f"{prefix}:s{i}")) for i in range(3)]
    by_python = [kind(RedisBackingMap(cluster_client, f"{prefix}:p{i}")) for i in range(3)]
    assert not one_slot(cluster_client, [k for s in by_script for k in s.backing.keys] + [marker])
    batches = [{(f"k{j % 7}",): j + txid for j in range(txid * 3)} for txid in range(1, 6)]
    for txid, batch in enumerate(batches, start=1):
        result = apply_partials(cluster_client, txid, [(s, batch) for s in by_script], marker_key=marker,
                                chunk_size=4)
        assert not result.already_committed and result.applied == 3 * len(batch)
        for state in by_python:
            state.begin_commit(txid)
            state.multi_update(list(batch), [combine_sum(d) for d in batch.values()])
            state.commit(txid)
    again = apply_partials(cluster_client, 5, [(s, batches[-1]) for s in by_script], marker_key=marker)
    assert again.already_committed and again.applied == 0, "the marker shows txid 5 committed"
    keys = [(f"k{j}",) for j in range(7)]
    for script_state, python_state in zip(by_script, by_python):
        assert script_state.backing.multi_get(keys) == python_state.backing.multi_get(keys)
    assert cluster_client.get(marker) == b"5"


def test_a_state_behind_the_txid_is_refused_across_slots(cluster_client, prefix):
    state = TransactionalMap(RedisBackingMap(cluster_client, f"{prefix}:t"))
    other = TransactionalMap(RedisBackingMap(cluster_client, f"{prefix}:u"))
    apply_partials(cluster_client, 3, [(state, {("a",): 1}), (other, {("b",): 1})])
    with pytest.raises(TxidOrderError, match="txid 2"):
        apply_partials(cluster_client, 2, [(other, {("c",): 1}), (state, {("a",): 1})])
