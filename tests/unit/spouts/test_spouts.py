"""Spouts' pure logic: metadata arithmetic, entry parsing, version checks. No service is touched.

redis.Redis objects are built (they connect lazily) but never used.
"""

from __future__ import annotations

import pytest
import redis

from txdag import TransactionAttempt
from txdag.errors import ConfigError, FormatVersionError
from txdag.spouts import (
    OpaquePartitionedStreamSpout,
    PartitionedTransactionalStreamSpout,
    Record,
    Rejection,
    SpoutKind,
    StreamPartition,
    TransactionalSpout,
    TweetsTransactionalSpout,
    streams,
    tweets,
)

UNUSED = "redis://127.0.0.1:1/0"  # never connected to


def client() -> redis.Redis:
    return redis.Redis.from_url(UNUSED)


# --- tweets: the seed's coordinator arithmetic ---------------------------------------------------------


def test_first_txid_starts_at_next_read() -> None:
    assert tweets.plan_batch(None, next_read=7, next_write=20, max_size=5) == {
        "v": 1,
        "from": 7,
        "quantity": 5,
    }


def test_next_txid_continues_after_previous_batch() -> None:
    prev = {"v": 1, "from": 7, "quantity": 5}
    assert tweets.plan_batch(prev, next_read=1, next_write=20, max_size=5) == {
        "v": 1,
        "from": 12,
        "quantity": 5,
    }


def test_last_batch_is_partial_and_drained_source_gives_empty_batch() -> None:
    assert tweets.plan_batch({"v": 1, "from": 1, "quantity": 10}, 1, 14, 10)["quantity"] == 3
    assert tweets.plan_batch({"v": 1, "from": 11, "quantity": 3}, 1, 14, 10) == {
        "v": 1,
        "from": 14,
        "quantity": 0,
    }


def test_next_write_behind_cursor_gives_no_tweets() -> None:
    assert tweets.plan_batch(None, next_read=9, next_write=3, max_size=10)["quantity"] == 0


def test_empty_batch_does_not_move_the_cursor() -> None:
    assert tweets.next_from({"v": 1, "from": 14, "quantity": 0}, next_read=1) == 14


@pytest.mark.parametrize(
    "metadata",
    [
        {"from": 1, "quantity": 2},
        {"v": 2, "from": 1, "quantity": 2},
        {"v": "1", "from": 1, "quantity": 2},
        {"v": 1, "from": 0, "quantity": 2},
        {"v": 1, "from": 1, "quantity": -1},
        {"v": 1, "from": True, "quantity": 2},
        {"v": 1, "from": 1},
        [1, 2],
        {"v": 1, "from": 5, "quantity": 2, "missing": ["5"]},
        {"v": 1, "from": 5, "quantity": 2, "missing": {"7": "2026-11-24T15:00:00+00:00"}},  # beyond the batch
        {"v": 1, "from": 5, "quantity": 2, "missing": {"x": "2026-11-24T15:00:00+00:00"}},
        {"v": 1, "from": 5, "quantity": 2, "missing": {"5": 1}},
    ],
)
def test_tweets_metadata_refuses_unknown_version_or_shape(metadata: object) -> None:
    with pytest.raises(FormatVersionError, match="tweets spout metadata"):
        tweets.check_metadata(metadata)


def test_tweets_metadata_with_ids_accepted_as_missing_and_without() -> None:
    """Older metadata has no "missing"; accepting more ids later keeps the time of those accepted before."""
    old = {"v": 1, "from": 501, "quantity": 10}
    assert tweets.check_metadata(old) == (501, 10) and tweets.accepted_missing(old) == {}
    first = tweets.with_missing(old, [506], "2026-11-24T15:00:00+00:00")
    assert first == {**old, "missing": {"506": "2026-11-24T15:00:00+00:00"}}
    assert tweets.check_metadata(first) == (501, 10)
    both = tweets.with_missing(first, [509, 506], "2026-11-24T16:00:00+00:00")
    assert tweets.accepted_missing(both) == {506: "2026-11-24T15:00:00+00:00", 509: "2026-11-24T16:00:00+00:00"}
    assert tweets.plan_batch(both, 1, 10_000, 10) == {"v": 1, "from": 511, "quantity": 10}, "the next batch follows"
    assert TweetsTransactionalSpout(client()).batch_size(both) == 10, "records + rejections, as before"


def test_tweets_spout_validates_its_configuration() -> None:
    with pytest.raises(ConfigError, match="max_transaction_size"):
        TweetsTransactionalSpout(client(), max_transaction_size=0)
    with pytest.raises(ConfigError, match="decode_responses"):
        TweetsTransactionalSpout(redis.Redis.from_url(UNUSED, decode_responses=True))
    spout = TweetsTransactionalSpout(client(), prefix="p:")
    assert spout.kind is SpoutKind.TRANSACTIONAL and isinstance(spout, TransactionalSpout)
    assert spout.key(3) == "p:3" and TweetsTransactionalSpout(client()).key(3) == "3"
    assert spout.batch_size({"v": 1, "from": 4, "quantity": 9}) == 9


def test_cursor_must_be_an_integer() -> None:
    assert tweets._cursor(None, "NEXT_READ", 1) == 1
    assert tweets._cursor(b"42", "NEXT_READ", 1) == 42
    with pytest.raises(ConfigError, match="'p:NEXT_WRITE' must hold a tweet id"):
        tweets._cursor(b"abc", "p:NEXT_WRITE", 1)


# --- streams: positions and metadata -------------------------------------------------------------------


def meta(**parts: dict) -> dict:
    return {"v": 1, "partitions": parts}


def test_partition_starts_at_zero_without_previous_metadata() -> None:
    assert streams.partition_start(None, "a") == "0-0"
    assert streams.partition_start(meta(b={"after": "5-0", "last": "6-0", "count": 1}), "a") == "0-0"


def test_partition_continues_after_last_or_keeps_position_when_empty() -> None:
    prev = meta(
        a={"after": "1-0", "last": "9-3", "count": 4},
        b={"after": "7-1", "last": None, "count": 0},
        c={"after": "2-0", "last": None, "count": 0, "unavailable": True},
    )
    assert [streams.partition_start(prev, name) for name in "abc"] == ["9-3", "7-1", "2-0"]


@pytest.mark.parametrize(
    "metadata",
    [
        {"partitions": {}},
        {"v": 2, "partitions": {}},
        {"v": 1},
        {"v": 1, "partitions": {"a": "0-0"}},
        meta(a={"after": "x", "last": None, "count": 0}),
        meta(a={"after": "0-0", "last": "1", "count": 1}),
        meta(a={"after": "0-0", "last": None, "count": 2}),
        meta(a={"after": "0-0", "last": "3-0", "count": 0}),
        meta(a={"after": "0-0", "last": "3-0", "count": True}),
    ],
)
def test_stream_metadata_refuses_unknown_version_or_shape(metadata: object) -> None:
    with pytest.raises(FormatVersionError, match="stream spout metadata"):
        streams.check_metadata(metadata)


def test_batch_size_sums_partitions() -> None:
    spout = OpaquePartitionedStreamSpout([StreamPartition("a", client(), "s")])
    metadata = meta(
        a={"after": "0-0", "last": "3-0", "count": 3}, b={"after": "1-0", "last": None, "count": 0}
    )
    assert spout.batch_size(metadata) == 3


def test_parse_entry_gives_record_with_partition_qualified_id() -> None:
    assert streams.parse_entry("a", "5-1", {b"value": b"hello \xc3\xa9"}, "value") == Record(
        "a:5-1", "hello é", "a"
    )


def test_parse_entry_without_the_field_is_a_rejection_naming_the_field() -> None:
    item = streams.parse_entry("a", "5-1", {b"other": b"x", b"\xff": b"y"}, "value")
    assert isinstance(item, Rejection) and item.id == "a:5-1" and item.partition == "a"
    assert "no field 'value'" in item.reason and "other" in item.reason


def test_parse_entry_with_invalid_utf8_is_a_rejection() -> None:
    item = streams.parse_entry("a", "5-1", {b"body": b"\xff\xfe"}, "body")
    assert isinstance(item, Rejection) and "'body' is not valid UTF-8" in item.reason


def test_stream_spouts_validate_partitions() -> None:
    with pytest.raises(ConfigError, match="non-empty list"):
        OpaquePartitionedStreamSpout([])
    with pytest.raises(ConfigError, match="unique"):
        OpaquePartitionedStreamSpout(
            [StreamPartition("a", client(), "s"), StreamPartition("a", client(), "t")]
        )
    with pytest.raises(ConfigError, match="max_per_partition"):
        PartitionedTransactionalStreamSpout([StreamPartition("a", client(), "s")], max_per_partition=0)
    with pytest.raises(ConfigError, match="non-empty stream key"):
        StreamPartition("a", client(), "")
    with pytest.raises(ConfigError, match="decode_responses"):
        StreamPartition("a", redis.Redis.from_url(UNUSED, decode_responses=True), "s")


def test_stream_spout_kinds() -> None:
    parts = [StreamPartition("a", client(), "s")]
    assert PartitionedTransactionalStreamSpout(parts).kind is SpoutKind.TRANSACTIONAL
    assert OpaquePartitionedStreamSpout(parts).kind is SpoutKind.OPAQUE
    assert isinstance(OpaquePartitionedStreamSpout(parts), TransactionalSpout)


def test_emit_refuses_metadata_naming_an_unknown_partition() -> None:
    spout = OpaquePartitionedStreamSpout([StreamPartition("a", client(), "s")])
    with pytest.raises(ConfigError, match=r"partition\(s\) \['zz'\]"):
        spout.emit_batch(TransactionAttempt(1, 1), meta(zz={"after": "0-0", "last": "1-0", "count": 1}))


def test_from_url_builds_a_fail_fast_client() -> None:
    part = StreamPartition.from_url("a", UNUSED, "s", timeout=0.5)
    kwargs = part.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 0.5 and kwargs["socket_connect_timeout"] == 0.5


@pytest.mark.parametrize(("metadata", "missing"), [
    ({"v": 1, "partitions": {"a": {"after": "0-0", "last": "1-0", "count": 1},
                             "c": {"after": "2-0", "last": None, "count": 0, "unavailable": True},
                             "b": {"after": "0-0", "last": None, "count": 0, "unavailable": True}}}, ("b", "c")),
    ({"v": 1, "partitions": {"a": {"after": "0-0", "last": "1-0", "count": 1}}}, ()),
    ({"v": 1, "from": 1, "quantity": 3}, ()),  # the tweets spout's metadata has no partitions
    ({}, ()),
])
def test_unavailable_partitions_are_those_an_opaque_batch_was_planned_without(metadata: dict,
                                                                               missing: tuple) -> None:
    from txdag.spouts.base import unavailable_partitions

    assert unavailable_partitions(metadata) == missing
