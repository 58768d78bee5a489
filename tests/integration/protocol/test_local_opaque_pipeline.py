"""Seed 004's word count with an opaque partitioned spout: a partition goes down while a txid is replayed.

The replay emits a different batch (without the lost partition), the later txid is re-emitted after it, the
partition comes back, and the committed counts equal the ground truth: nothing skipped, nothing counted twice.
"""

from collections import Counter

import pytest
from access import ZK_AUTH

from txdag.errors import CascadeError, SourceUnavailable
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts import OpaquePartitionedStreamSpout, StreamPartition, append_entries
from txdag.spouts.samples import sample_sentences
from txdag.state import OpaqueMap, OpaqueValue, RedisBackingMap
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore


def word_count(records):
    return {"words": Counter((word,) for record in records for word in record.value.split())}


@pytest.fixture
def partitions(redis_url, second_redis, prefix):
    return [StreamPartition.from_url("a", redis_url, f"{prefix}:a", timeout=0.5),
            StreamPartition.from_url("b", second_redis.url, f"{prefix}:b", timeout=0.5)]


def test_partition_lost_during_a_replay_then_back(redis_client, zk_hosts, zk_root, prefix, partitions, second_redis):
    sentences = {"a": sample_sentences(60, seed=1), "b": sample_sentences(45, seed=2)}
    for part in partitions:
        append_entries(part, sentences[part.name][:30])
    spout = OpaquePartitionedStreamSpout(partitions, max_per_partition=10)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=2)
    words = OpaqueMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    topology = LocalTopology(coordinator, redis_client, {"words": words}, word_count)

    first, second = topology.coordinate("run1"), topology.coordinate("run2")
    topology.process(second)
    second_redis.kill()  # partition b goes down before txid 1 is processed
    with pytest.raises(SourceUnavailable, match=r"partition\(s\) 'b' .* unreachable"):
        topology.process(first)
    with pytest.raises(CascadeError, match="txid 1"):
        topology.commit(second.tx)

    replay1, replay2 = topology.coordinate("run1"), topology.coordinate("run2")
    assert replay1.metadata["partitions"]["b"]["count"] == 0, "the replay leaves the lost partition out"
    assert replay2.metadata["partitions"]["a"]["after"] == replay1.metadata["partitions"]["a"]["last"]
    for emission in (replay1, replay2):
        topology.process(emission)
        assert isinstance(topology.commit(emission.tx), Committed)

    second_redis.start()  # b comes back with its entries; more data arrives on both
    append_entries(partitions[0], sentences["a"][30:])
    append_entries(partitions[1], sentences["b"][30:])
    while isinstance(emission := topology.coordinate(f"more{coordinator.status().topology.last_txid}"), Emission):
        topology.process(emission)
        topology.commit(emission.tx)

    truth = Counter(w for part in sentences.values() for s in part for w in s.split())
    stored = words.backing.multi_get([(w,) for w in truth])
    assert {w: v.curr for w, v in zip(truth, stored)} == dict(truth)
    assert all(isinstance(v, OpaqueValue) for v in stored)
