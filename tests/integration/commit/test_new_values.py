"""New values streams: a commit's rows appended once per txid, in txid order, readable as a stream source."""

from txdag.attempt import TransactionAttempt
from txdag.commit.newvalues import emit_values, values_key
from txdag.spouts.streams import PartitionedTransactionalStreamSpout, StreamPartition


def test_a_txid_emits_once_and_a_later_txid_follows(redis_client, prefix):
    assert emit_values(redis_client, prefix, "trending", 1, [{"tag": "#a", "n": 2}, {"tag": "#b", "n": 1}]) == 2
    assert emit_values(redis_client, prefix, "trending", 1, [{"tag": "#a", "n": 9}]) == 0  # a retried commit
    assert emit_values(redis_client, prefix, "trending", 2, []) == 0
    assert emit_values(redis_client, prefix, "trending", 3, [["#c", 5]]) == 1
    entries = redis_client.xrange(values_key(prefix, "trending"))
    assert [(e[0].decode(), e[1][b"value"].decode()) for e in entries] == [
        ("1-1", '{"tag":"#a","n":2}'), ("1-2", '{"tag":"#b","n":1}'), ("3-1", '["#c",5]')]


def test_an_earlier_txid_after_a_later_one_is_not_emitted(redis_client, prefix):
    emit_values(redis_client, prefix, "s", 5, [1])
    assert emit_values(redis_client, prefix, "s", 4, [2]) == 0
    assert redis_client.xlen(values_key(prefix, "s")) == 1


def test_another_topology_reads_the_stream_as_its_source(redis_client, prefix):
    emit_values(redis_client, prefix, "trending", 1, [["#a", 2], ["#b", 1]])
    key = values_key(prefix, "trending")
    spout = PartitionedTransactionalStreamSpout([StreamPartition(key, redis_client, key)], max_per_partition=10,
                                                field="value", topology=f"{prefix}-downstream")
    metadata = spout.initialize_transaction(1, None)
    batch = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    assert [r.value for r in batch.records] == ['["#a",2]', '["#b",1]']
