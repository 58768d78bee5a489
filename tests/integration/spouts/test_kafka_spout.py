"""KafkaSource on the real broker of scripts/kafka.sh (TXDAG_TEST_KAFKA_BOOTSTRAP): batches by offset range per
partition, a partition added mid-run, a replay, retention deleting offsets before they were read (Kafka's own
DeleteRecords moves the first offset as retention does), a topic deleted and created again, a value that is not
text, a broker that is not there; and a word count through LocalTopology, exact against the topic's records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from access import ZK_AUTH
from support.kafka import (
    add_partitions,
    create_topic,
    delete_records,
    delete_topic,
    group_offsets,
    partitions_of,
    produce,
    watermarks,
)

from txdag import TransactionAttempt
from txdag.errors import BatchReadError, ConfigError, SourceUnavailable, StoreWentBackwards
from txdag.local import LocalTopology
from txdag.protocol import Committed
from txdag.spouts import SpoutContext, SpoutKind
from txdag.spouts.kafka import KafkaSource
from txdag.state import OpaqueMap, RedisBackingMap
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore


@pytest.fixture
def topic(kafka_bootstrap: str, prefix: str) -> Iterator[str]:
    name = f"txdag-test-{prefix}"
    create_topic(kafka_bootstrap, name, 2)
    partitions_of(kafka_bootstrap, name, 2)
    yield name
    delete_topic(kafka_bootstrap, name)


def spout_of(bootstrap: str, topic: str, prefix: str, config: dict | None = None, **fields):
    context = SpoutContext(prefix, kafka_configs={"kafka_default": config or {"bootstrap.servers": bootstrap}})
    return KafkaSource(topic, **fields).build(context)


def test_batches_are_offset_ranges_and_a_partition_added_joins_the_next_txid(kafka_bootstrap, topic, prefix):
    produce(kafka_bootstrap, topic, [(i % 2, f"v{i}") for i in range(30)])
    spout = spout_of(kafka_bootstrap, topic, prefix, max_per_partition=10)
    try:
        m1 = spout.initialize_transaction(1, None)
        assert m1 == {"v": 1, "topic": topic, "topic_id": m1["topic_id"],
                      "partitions": {"0": {"from": 0, "to": 10}, "1": {"from": 0, "to": 10}}}
        assert len(m1["topic_id"]) == 22  # Kafka's topic id (base64 of a UUID): a topic created again differs
        assert spout.lag(m1) == 10 and spout.batch_size(m1) == 20
        add_partitions(kafka_bootstrap, topic, 3)
        partitions_of(kafka_bootstrap, topic, 3)
        produce(kafka_bootstrap, topic, [(2, "new0"), (2, "new1")])
        m2 = spout.initialize_transaction(2, m1)
        assert m2["partitions"] == {"0": {"from": 10, "to": 15}, "1": {"from": 10, "to": 15}, "2": {"from": 0, "to": 2}}
        assert not spout.is_ready(m2)
        batches = [spout.emit_batch(TransactionAttempt(n, 1), m) for n, m in ((1, m1), (2, m2))]
        values = sorted(r.value for b in batches for r in b.records)
        assert values == sorted([f"v{i}" for i in range(30)] + ["new0", "new1"])
        assert batches[1].records[-1].id == "2@1" and batches[1].records[-1].partition == "2"
        again = spout.emit_batch(TransactionAttempt(1, 2), m1)  # a replay of a stored range: the same records
        assert again.records == batches[0].records
    finally:
        spout.close()


def test_retention_loss_is_a_counted_rejection_for_the_opaque_spout(kafka_bootstrap, topic, prefix):
    produce(kafka_bootstrap, topic, [(0, f"v{i}") for i in range(20)])
    spout = spout_of(kafka_bootstrap, topic, prefix, max_per_partition=5)
    try:
        m1 = spout.initialize_transaction(1, None)
        delete_records(kafka_bootstrap, topic, 0, 12)  # offsets 5..11 never read
        m2 = spout.initialize_transaction(2, m1)
        assert m2["partitions"]["0"] == {"from": 12, "to": 17, "lost": [5, 12]}
        batch = spout.emit_batch(TransactionAttempt(2, 1), m2)
        assert [r.value for r in batch.records] == [f"v{i}" for i in range(12, 17)]
        (lost,) = batch.rejections
        assert (lost.id, lost.partition) == ("0@5", "0")
        assert lost.reason == (f"offsets 5 to 11 of partition 0 of Kafka topic {topic!r} were deleted by the topic's "
                               "retention before they were read")
        assert spout.batch_size(m2) == 12  # 5 records and 7 lost offsets
        with pytest.raises(BatchReadError, match=r"offsets 0 to 4 could not be read .* re-emission plans"):
            spout.emit_batch(TransactionAttempt(1, 2), m1)  # txid 1's range is gone too now
    finally:
        spout.close()


def test_retention_loss_halts_the_transactional_spout_naming_the_range(kafka_bootstrap, topic, prefix):
    produce(kafka_bootstrap, topic, [(1, f"v{i}") for i in range(20)])
    spout = spout_of(kafka_bootstrap, topic, prefix, max_per_partition=5, kind="transactional")
    try:
        m1 = spout.initialize_transaction(1, None)
        delete_records(kafka_bootstrap, topic, 1, 9)
        with pytest.raises(StoreWentBackwards) as caught:
            spout.initialize_transaction(2, m1)
        message = str(caught.value)
        assert f"offsets 5 to 8 of partition 1 of Kafka topic {topic!r} were deleted by the topic's retention" \
            in message
        assert f"txdag reset {prefix} --confirm" in message and "kind='opaque'" in message
    finally:
        spout.close()


@pytest.mark.parametrize("produced_again", [0, 30])
def test_a_topic_deleted_and_created_again_halts_naming_both_sides(kafka_bootstrap, topic, prefix, produced_again):
    """Created again, the topic's offsets start over: with fewer records than the last batch read (0) or more (30,
    which offsets alone would not tell), the new topic id halts the topology instead of skipping or re-reading."""
    produce(kafka_bootstrap, topic, [(0, f"v{i}") for i in range(8)])
    spout = spout_of(kafka_bootstrap, topic, prefix)
    m1 = spout.initialize_transaction(1, None)
    spout.close()
    delete_topic(kafka_bootstrap, topic)
    create_topic(kafka_bootstrap, topic, 2)
    partitions_of(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(0, f"new{i}") for i in range(produced_again)])
    spout = spout_of(kafka_bootstrap, topic, prefix)
    try:
        with pytest.raises(StoreWentBackwards) as caught:
            spout.initialize_transaction(2, m1)
        message = str(caught.value)
        assert f"Kafka topic {topic!r} at {kafka_bootstrap} has the id " in message
        assert f"but earlier batches read the topic of id {m1['topic_id']}: it was deleted and created again" \
            in message and f"txdag reset {prefix} --confirm" in message
        with pytest.raises(StoreWentBackwards, match="deleted and created again"):
            spout.lag(m1)  # txdag doctor --check stores asks the same
        with pytest.raises(StoreWentBackwards, match="deleted and created again"):
            spout.emit_batch(TransactionAttempt(1, 2), m1)  # txid 1 in flight, or replayed: not the new records
    finally:
        spout.close()


def test_a_value_that_is_not_text_is_a_rejection(kafka_bootstrap, topic, prefix):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"ok", partition=0)
    producer.produce(topic, b"\xff\xfe", partition=0)
    assert producer.flush(30) == 0
    spout = spout_of(kafka_bootstrap, topic, prefix)
    try:
        batch = spout.emit_batch(TransactionAttempt(1, 1), spout.initialize_transaction(1, None))
        assert [r.value for r in batch.records] == ["ok"]
        assert [(r.id, r.reason) for r in batch.rejections] == [
            ("0@1", "value is not valid UTF-8")]
    finally:
        spout.close()


def test_a_broker_that_is_not_there_is_source_unavailable_naming_it(prefix):
    from support.servers import free_port

    address = f"127.0.0.1:{free_port()}"
    spout = spout_of(address, "t", prefix, kind=SpoutKind.TRANSACTIONAL)
    try:
        with pytest.raises(SourceUnavailable, match=rf"Kafka topic 't' at {address}: listing its partitions failed"):
            spout.is_ready(None)
    finally:
        spout.close()


def test_a_connection_that_logs_in_reads_through_sasl_and_a_wrong_password_is_a_config_error(
        kafka_bootstrap, kafka_sasl_config, topic, prefix):
    """The connection's extra with librdkafka's SASL settings (as the Kafka provider's hooks use them): the spout
    plans and reads through the broker's SASL listener; refused credentials halt with the connection named, not
    "start the broker"."""
    produce(kafka_bootstrap, topic, [(i % 2, f"v{i}") for i in range(6)])
    spout = spout_of("", topic, prefix, kafka_sasl_config, kind=SpoutKind.TRANSACTIONAL)
    try:
        metadata = spout.initialize_transaction(1, None)
        assert metadata["partitions"] == {"0": {"from": 0, "to": 3}, "1": {"from": 0, "to": 3}}
        assert sorted(r.value for r in spout.emit_batch(TransactionAttempt(1, 1), metadata).records) == [
            f"v{i}" for i in range(6)]
    finally:
        spout.close()
    wrong = spout_of("", topic, prefix, {**kafka_sasl_config, "sasl.password": "not-it"},
                     kind=SpoutKind.TRANSACTIONAL)
    try:
        refused = (rf"topology '{prefix}': Kafka at {kafka_sasl_config['bootstrap.servers']} refused the credentials "
                   r"of the Kafka connection 'kafka_default' .*SASL authentication.*: give its extra the right "
                   r"sasl.username")
        with pytest.raises(ConfigError, match=refused):
            wrong.is_ready(None)
    finally:
        wrong.close()


def test_a_word_count_over_kafka_through_local_topology_is_exact(kafka_bootstrap, topic, prefix, redis_client,
                                                                  zk_hosts, zk_root):
    """Opaque txids of at most 4 records per partition; the first attempt of txid 2 fails and is replayed, a
    partition is added and more records arrive mid-run: every record is counted once."""
    sent = [(i % 2, f"w{i % 7} w{i % 3}") for i in range(40)]
    produce(kafka_bootstrap, topic, sent[:24])
    spout = spout_of(kafka_bootstrap, topic, prefix, max_per_partition=4)
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=2)
    words = OpaqueMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    failed = []

    def word_count(records):
        if len(failed) == 0 and coordinator.status().topology.committed_txid == 1:
            failed.append(records[0].id)
            raise RuntimeError("the first attempt of txid 2 fails")
        return {"words": Counter((w,) for r in records for w in r.value.split())}

    topology = LocalTopology(coordinator, redis_client, {"words": words}, word_count)
    try:
        for n in range(30):
            if n == 3:
                add_partitions(kafka_bootstrap, topic, 3)
                partitions_of(kafka_bootstrap, topic, 3)
                sent += [(2, "w1 w2"), (2, "w9")]
                produce(kafka_bootstrap, topic, sent[24:])
            emission = topology.coordinate(f"run{n}")
            if not isinstance(emission, Emission):
                assert n > 3, f"run{n}: {emission}"
                break
            try:
                topology.process(emission)
            except RuntimeError:
                emission = topology.coordinate(f"run{n}")  # the run again: its txid re-emitted, attempt 2
                assert emission.tx.attempt == 2
                topology.process(emission)
            assert isinstance(topology.commit(emission.tx), Committed)
        assert failed, "no attempt failed: the replay was not exercised"
        truth = Counter(w for _, value in sent for w in value.split())
        stored = words.backing.multi_get([(w,) for w in truth])
        assert {w: v.curr for w, v in zip(truth, stored)} == dict(truth)
        assert coordinator.status().topology.committed_txid == coordinator.status().topology.last_txid
        ends = [watermarks(kafka_bootstrap, topic, p)[1] for p in range(3)]
        assert group_offsets(kafka_bootstrap, f"txdag-{prefix}", topic, 3) == ends, "the group's lag is not 0"
    finally:
        spout.close()
