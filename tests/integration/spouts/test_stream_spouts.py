"""Partitioned stream spouts on real Redis servers: the shared test Redis plus a second redis-server per test
(the ``second_redis`` fixture of conftest, which can be killed, frozen and restarted with its data)."""

from __future__ import annotations

import random
import time

import pytest

from txdag import TransactionAttempt
from txdag.errors import BatchReadError, ConfigError, SourceUnavailable
from txdag.spouts import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    Record,
    StreamPartition,
    append_entries,
)


@pytest.fixture
def server(second_redis):
    return second_redis


@pytest.fixture
def parts(redis_url: str, redis_client, server, prefix: str) -> list[StreamPartition]:
    """Partition "a" on the shared test Redis, "b" on the second server; fail-fast clients (redis_client:
    so that the test's keys are deleted afterwards)."""
    return [
        StreamPartition.from_url("a", redis_url, f"{prefix}:a", timeout=0.5),
        StreamPartition.from_url("b", server.url, f"{prefix}:b", timeout=0.5),
    ]


def values(batch_records: list[Record]) -> list[str]:
    return [r.value for r in batch_records]


def test_transactional_batches_continue_and_drain(parts: list[StreamPartition]) -> None:
    a_ids = append_entries(parts[0], [f"a{i}" for i in range(5)])
    append_entries(parts[1], [f"b{i}" for i in range(3)])
    spout = PartitionedTransactionalStreamSpout(parts, max_per_partition=2)
    m1 = spout.initialize_transaction(1, None)
    assert m1["partitions"]["a"] == {"after": "0-0", "last": a_ids[1], "count": 2}
    m2 = spout.initialize_transaction(2, m1)
    m3 = spout.initialize_transaction(3, m2)
    assert m3["partitions"]["b"] == {"after": m2["partitions"]["b"]["last"], "last": None, "count": 0}
    assert [spout.batch_size(m) for m in (m1, m2, m3)] == [4, 3, 1] and not spout.is_ready(m3)
    batches = [spout.emit_batch(TransactionAttempt(i, 1), m) for i, m in enumerate((m1, m2, m3), 1)]
    emitted = sorted(v for b in batches for v in values(b.records))
    assert emitted == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(3)])
    assert batches[0].records[0] == Record(f"a:{a_ids[0]}", "a0", "a")
    m4 = spout.initialize_transaction(4, m3)  # empty for "b" twice in a row: position kept
    assert m4["partitions"]["b"]["after"] == m3["partitions"]["b"]["after"]


def test_transactional_replay_is_identical(parts: list[StreamPartition]) -> None:
    append_entries(parts[0], ["x", "y", "z"])
    append_entries(parts[1], ["p"])
    spout = PartitionedTransactionalStreamSpout(parts, max_per_partition=2)
    metadata = spout.initialize_transaction(1, None)
    first = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    append_entries(parts[0], ["late"])
    append_entries(parts[1], ["late"])
    again = spout.emit_batch(TransactionAttempt(1, 2), metadata)
    assert again.records == first.records and values(first.records) == ["x", "y", "p"]


def test_trimmed_stream_is_a_batch_read_error(parts: list[StreamPartition]) -> None:
    ids = append_entries(parts[0], ["x", "y", "z"])
    spout = PartitionedTransactionalStreamSpout(parts)
    metadata = spout.initialize_transaction(1, None)
    parts[0].client.xtrim(parts[0].stream, maxlen=1, approximate=False)
    with pytest.raises(BatchReadError) as info:
        spout.emit_batch(TransactionAttempt(1, 2), metadata)
    message = str(info.value)
    assert "partition 'a'" in message and f"(0-0, {ids[-1]}]" in message and "has 3" in message
    assert "cannot replay a different batch" in message


def test_transactional_halts_while_a_partition_is_down(
    parts: list[StreamPartition], server
) -> None:
    append_entries(parts[0], ["x"])
    append_entries(parts[1], ["p", "q"])
    spout = PartitionedTransactionalStreamSpout(parts)
    metadata = spout.initialize_transaction(1, None)
    first = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    server.kill()
    with pytest.raises(SourceUnavailable, match=r"partition\(s\) 'b' at Redis 127.0.0.1:\d+/0 unreachable"):
        spout.emit_batch(TransactionAttempt(1, 2), metadata)
    with pytest.raises(SourceUnavailable, match="allocates no txid"):
        spout.initialize_transaction(2, metadata)
    with pytest.raises(SourceUnavailable):
        spout.is_ready(metadata)
    server.start()
    assert spout.emit_batch(TransactionAttempt(1, 3), metadata).records == first.records


def test_opaque_continues_where_the_previous_batch_ended(parts: list[StreamPartition]) -> None:
    append_entries(parts[0], ["a0", "a1", "a2"])
    spout = OpaquePartitionedStreamSpout(parts, max_per_partition=2)
    m1 = spout.initialize_transaction(1, None)
    append_entries(parts[0], ["a3"])
    append_entries(parts[1], ["b0"])
    m2_first = spout.initialize_transaction(2, m1)
    append_entries(parts[0], ["a4"])
    m2_replay = spout.initialize_transaction(2, m1)  # opaque re-emission recomputes from txid 1's end
    assert m2_replay["partitions"]["a"]["after"] == m1["partitions"]["a"]["last"]
    assert values(spout.emit_batch(TransactionAttempt(2, 1), m2_first).records) == ["a2", "a3", "b0"]
    assert values(spout.emit_batch(TransactionAttempt(2, 2), m2_replay).records) == ["a2", "a3", "b0"]
    m3 = spout.initialize_transaction(3, m2_replay)
    assert values(spout.emit_batch(TransactionAttempt(3, 1), m3).records) == ["a4"]


def test_opaque_keeps_emitting_while_a_partition_is_down_then_catches_up(
    parts: list[StreamPartition], server
) -> None:
    append_entries(parts[0], ["a0"])
    b_ids = append_entries(parts[1], ["b0", "b1"])
    spout = OpaquePartitionedStreamSpout(parts, max_per_partition=1)
    m1 = spout.initialize_transaction(1, None)
    assert values(spout.emit_batch(TransactionAttempt(1, 1), m1).records) == ["a0", "b0"]
    m2_planned = spout.initialize_transaction(2, m1)  # planned while "b" was up
    server.kill()
    with pytest.raises(SourceUnavailable, match="re-emission recomputes"):
        spout.emit_batch(TransactionAttempt(2, 1), m2_planned)
    append_entries(parts[0], ["a1"])
    m2 = spout.initialize_transaction(2, m1)  # the re-emission skips "b"
    assert m2["partitions"]["b"] == {"after": b_ids[0], "last": None, "count": 0, "unavailable": True}
    assert values(spout.emit_batch(TransactionAttempt(2, 2), m2).records) == ["a1"]
    assert spout.is_ready(m2) is False  # "a" drained, "b" down
    server.start()
    assert spout.is_ready(m2) is True
    m3 = spout.initialize_transaction(3, m2)
    assert m3["partitions"]["b"] == {"after": b_ids[0], "last": b_ids[1], "count": 1}
    assert values(spout.emit_batch(TransactionAttempt(3, 1), m3).records) == ["b1"]


def test_opaque_raises_when_every_partition_is_down(server, prefix: str) -> None:
    only = StreamPartition.from_url("b", server.url, f"{prefix}:b", timeout=0.5)
    spout = OpaquePartitionedStreamSpout([only])
    server.kill()
    with pytest.raises(SourceUnavailable, match="every partition"):
        spout.is_ready(None)


def test_opaque_treats_a_hung_partition_as_unavailable(
    parts: list[StreamPartition], server
) -> None:
    append_entries(parts[0], ["a0"])
    append_entries(parts[1], ["b0"])
    spout = OpaquePartitionedStreamSpout(parts)
    server.freeze(True)
    started = time.monotonic()
    m1 = spout.initialize_transaction(1, None)
    elapsed = time.monotonic() - started
    server.freeze(False)
    assert m1["partitions"]["b"]["unavailable"] is True and elapsed < 5
    assert values(spout.emit_batch(TransactionAttempt(1, 1), m1).records) == ["a0"]
    m2 = spout.initialize_transaction(2, m1)
    assert values(spout.emit_batch(TransactionAttempt(2, 1), m2).records) == ["b0"]


@pytest.mark.parametrize("seed", [7, 20240611])
def test_opaque_chain_with_outage_emits_every_entry_exactly_once(
    seed: int, parts: list[StreamPartition], server
) -> None:
    """12 txids with random appends, failed attempts and a 4-txid outage of "b": every entry exactly once."""
    rng = random.Random(seed)
    spout = OpaquePartitionedStreamSpout(parts, max_per_partition=7)
    appended: list[str] = []
    emitted: list[str] = []
    prev, replays, skipped = None, 0, 0
    for txid in range(1, 13):
        if txid == 8:
            server.start()
        for part in parts if server.process else parts[:1]:
            new = [f"{part.name}-{txid}-{i}" for i in range(rng.randint(1, 12))]
            append_entries(part, new)
            appended += new
        metadata = spout.initialize_transaction(txid, prev)
        if txid == 4:  # "b" goes down between planning and reading: the attempt fails
            server.kill()
            with pytest.raises(SourceUnavailable):
                spout.emit_batch(TransactionAttempt(txid, 1), metadata)
        if txid == 4 or rng.random() < 0.3:  # the opaque re-emission recomputes from txid-1's end
            append_entries(parts[0], [late := f"a-{txid}-late"])
            appended.append(late)
            metadata, replays = spout.initialize_transaction(txid, prev), replays + 1
        skipped += bool(metadata["partitions"]["b"].get("unavailable"))
        emitted += values(spout.emit_batch(TransactionAttempt(txid, 2), metadata).records)
        prev = metadata
    while spout.is_ready(prev):
        prev = spout.initialize_transaction(99, prev)
        emitted += values(spout.emit_batch(TransactionAttempt(99, 1), prev).records)
    assert replays >= 3 and skipped == 4
    assert len(emitted) == len(set(emitted))
    assert sorted(emitted) == sorted(appended)


def test_entries_without_the_field_or_not_utf8_are_rejections(parts: list[StreamPartition]) -> None:
    good = append_entries(parts[0], ["ok"])
    no_field = parts[0].client.xadd(parts[0].stream, {"text": "no value field"}).decode()
    bad = append_entries(parts[0], [b"\xff\xfe"])
    append_entries(parts[0], ["ok too"])
    spout = PartitionedTransactionalStreamSpout(parts)
    metadata = spout.initialize_transaction(1, None)
    batch = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    assert values(batch.records) == ["ok", "ok too"] and batch.records[0].id == f"a:{good[0]}"
    reasons = {j.id: j.reason for j in batch.rejections}
    assert len(reasons) == 2 and "no field 'value' (its fields: text)" in reasons[f"a:{no_field}"]
    assert "not valid UTF-8" in reasons[f"a:{bad[0]}"]
    assert spout.batch_size(metadata) == 4


def test_custom_field_and_wrong_key_type(parts: list[StreamPartition], prefix: str) -> None:
    append_entries(parts[1], ["hello"], field="body")
    spout = OpaquePartitionedStreamSpout(parts[1:], field="body")
    metadata = spout.initialize_transaction(1, None)
    assert values(spout.emit_batch(TransactionAttempt(1, 1), metadata).records) == ["hello"]
    parts[0].client.set(parts[0].stream, "not a stream")
    with pytest.raises(ConfigError, match=f"key '{prefix}:a' is not a stream"):
        OpaquePartitionedStreamSpout(parts[:1]).is_ready(None)


def test_large_partition_batch_is_read_in_chunks(parts: list[StreamPartition]) -> None:
    ids = append_entries(parts[1], [f"v{i}" for i in range(23_000)])
    spout = PartitionedTransactionalStreamSpout(parts[1:], max_per_partition=25_000)
    metadata = spout.initialize_transaction(1, None)
    assert metadata["partitions"]["b"] == {"after": "0-0", "last": ids[-1], "count": 23_000}
    batch = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    assert [r.id for r in batch.records] == [f"b:{i}" for i in ids]


def test_lag_counts_entries_after_the_last_batch_and_refuses_a_partial_count(
    parts: list[StreamPartition], server
) -> None:
    append_entries(parts[0], [f"a{i}" for i in range(5)])
    append_entries(parts[1], [f"b{i}" for i in range(3)])
    spout = OpaquePartitionedStreamSpout(parts, max_per_partition=2)
    assert spout.lag(None) == 8
    m1 = spout.initialize_transaction(1, None)
    assert spout.lag(m1) == 8 - spout.batch_size(m1) == 4
    assert spout.lag(m1, cap=1) == 2  # at most one per partition
    server.kill()
    with pytest.raises(SourceUnavailable, match=r"partition\(s\) 'b' .* the lag is unknown"):
        spout.lag(m1)


@pytest.mark.parametrize("kind", [PartitionedTransactionalStreamSpout, OpaquePartitionedStreamSpout])
def test_a_stream_that_went_backwards_halts_instead_of_skipping(parts: list[StreamPartition], kind) -> None:
    """A stream recreated (or restored from an older backup) below the last batch's end: planning the next batch
    raises StoreWentBackwards naming the partition, the stream and both ids (issue 20); a stream that only grew,
    or whose old entries were trimmed, goes on."""
    from txdag.errors import StoreWentBackwards

    append_entries(parts[0], ["a0", "a1", "a2"])
    spout = kind(parts[:1], max_per_partition=5)
    m1 = spout.initialize_transaction(1, None)
    parts[0].client.xtrim(parts[0].stream, maxlen=1)  # trimmed from the front: the newest entry is kept
    assert not spout.is_ready(m1)
    last = m1["partitions"]["a"]["last"]
    parts[0].client.delete(parts[0].stream)
    with pytest.raises(StoreWentBackwards) as caught:
        spout.is_ready(m1)
    message = str(caught.value)
    assert "partition 'a'" in message and f"stream '{parts[0].stream}'" in message
    assert f"read it up to entry {last}" in message and "holds no entry" in message
    parts[0].client.xadd(parts[0].stream, {"value": "old"}, id="1-1")  # restored from a backup older than m1
    with pytest.raises(StoreWentBackwards, match="its newest entry is 1-1"):
        spout.initialize_transaction(2, m1)
