"""TweetsTransactionalSpout on a real Redis, seed 000's layout under a unique prefix per test."""

from __future__ import annotations

import pytest
import redis

from txdag import TransactionAttempt
from txdag.errors import BatchReadError, ServiceUnavailable
from txdag.spouts import Record, TweetsTransactionalSpout, append_tweets


def chain(spout: TweetsTransactionalSpout) -> list[dict]:
    """Allocate txids the coordinator's way until the spout is not ready."""
    metas: list[dict] = []
    while spout.is_ready(metas[-1] if metas else None):
        metas.append(spout.initialize_transaction(len(metas) + 1, metas[-1] if metas else None))
    return metas


def test_append_tweets_uses_the_seed_layout(redis_client: redis.Redis, prefix: str) -> None:
    assert append_tweets(redis_client, ["a", "b"], prefix=prefix) == [1, 2]
    assert append_tweets(redis_client, ["c"], prefix=prefix) == [3]
    assert redis_client.mget([f"{prefix}1", f"{prefix}2", f"{prefix}3"]) == [b"a", b"b", b"c"]
    assert redis_client.get(f"{prefix}NEXT_WRITE") == b"4"
    assert append_tweets(redis_client, [], prefix=prefix) == []


def test_batches_of_max_size_with_a_partial_last_batch(redis_client: redis.Redis, prefix: str) -> None:
    texts = [f"tweet {i} #tag @user" for i in range(1, 24)]
    append_tweets(redis_client, texts, prefix=prefix)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix, max_transaction_size=10, topology=prefix)
    metas = chain(spout)
    assert metas == [
        {"v": 1, "from": 1, "quantity": 10},
        {"v": 1, "from": 11, "quantity": 10},
        {"v": 1, "from": 21, "quantity": 3},
    ]
    assert spout.is_ready(metas[-1]) is False and spout.lag(metas[-1]) == 0 and spout.lag(None) == 23
    batches = [spout.emit_batch(TransactionAttempt(i, 1), m) for i, m in enumerate(metas, 1)]
    assert [r.value for b in batches for r in b.records] == texts
    assert batches[2].records[0] == Record("21", texts[20], None)
    assert all(not b.rejections for b in batches)
    drained = spout.initialize_transaction(4, metas[-1])
    assert drained == {"v": 1, "from": 24, "quantity": 0}
    assert spout.emit_batch(TransactionAttempt(4, 1), drained).records == []


def test_replay_of_the_same_metadata_gives_the_same_records(redis_client: redis.Redis, prefix: str) -> None:
    append_tweets(redis_client, [f"t{i}" for i in range(5)], prefix=prefix)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix, max_transaction_size=3)
    metadata = spout.initialize_transaction(1, None)
    first = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    append_tweets(redis_client, ["later"], prefix=prefix)  # new tweets do not change a stored batch
    again = spout.emit_batch(TransactionAttempt(1, 2), metadata)
    assert again.records == first.records and [r.id for r in again.records] == ["1", "2", "3"]


def test_next_read_is_honoured_for_the_first_txid(redis_client: redis.Redis, prefix: str) -> None:
    append_tweets(redis_client, [f"t{i}" for i in range(1, 8)], prefix=prefix)
    redis_client.set(f"{prefix}NEXT_READ", 5)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix)
    metadata = spout.initialize_transaction(1, None)
    assert metadata == {"v": 1, "from": 5, "quantity": 3}
    assert [r.value for r in spout.emit_batch(TransactionAttempt(1, 1), metadata).records] == [
        "t5",
        "t6",
        "t7",
    ]


def test_nothing_written_is_not_ready(redis_client: redis.Redis, prefix: str) -> None:
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix)
    assert spout.is_ready(None) is False and spout.lag(None) == 0


def test_missing_key_in_range_is_a_batch_read_error_naming_the_key(
    redis_client: redis.Redis, prefix: str
) -> None:
    append_tweets(redis_client, ["a", "b", "c"], prefix=prefix)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix, topology="tw")
    metadata = spout.initialize_transaction(1, None)
    redis_client.delete(f"{prefix}2")
    with pytest.raises(BatchReadError) as info:
        spout.emit_batch(TransactionAttempt(1, 2), metadata)
    message = str(info.value)
    assert f"key '{prefix}2' is missing" in message and "restore key" in message
    assert "'tw'" in message and "txid 1 attempt 2" in message


def test_non_utf8_tweet_is_one_rejection_and_the_others_are_intact(
    redis_client: redis.Redis, prefix: str
) -> None:
    ids = append_tweets(redis_client, ["good 1", b"bad \xff\xfe", "good 3 \u00e9"], prefix=prefix)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix)
    metadata = spout.initialize_transaction(1, None)
    batch = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    assert [r.value for r in batch.records] == ["good 1", "good 3 \u00e9"]
    assert len(batch.rejections) == 1 and batch.rejections[0].id == str(ids[1])
    assert "not valid UTF-8" in batch.rejections[0].reason
    assert spout.batch_size(metadata) == len(batch.records) + len(batch.rejections)


def test_hash_at_a_tweet_key_is_a_rejection_saying_so(redis_client: redis.Redis, prefix: str) -> None:
    append_tweets(redis_client, ["a", "b", "c"], prefix=prefix)
    redis_client.delete(f"{prefix}2")
    redis_client.hset(f"{prefix}2", "text", "b")
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix)
    batch = spout.emit_batch(TransactionAttempt(1, 1), spout.initialize_transaction(1, None))
    assert [r.id for r in batch.records] == ["1", "3"]
    assert [(j.id, j.reason) for j in batch.rejections] == [
        ("2", f"key '{prefix}2' holds a Redis hash, not a string")
    ]


def test_large_batch_is_read_in_chunks_in_order(redis_client: redis.Redis, prefix: str) -> None:
    texts = [f"t{i}" for i in range(25_000)]
    append_tweets(redis_client, texts, prefix=prefix)
    spout = TweetsTransactionalSpout(redis_client, prefix=prefix, max_transaction_size=30_000)
    metadata = spout.initialize_transaction(1, None)
    assert metadata["quantity"] == 25_000
    batch = spout.emit_batch(TransactionAttempt(1, 1), metadata)
    assert [r.value for r in batch.records] == texts
    assert batch.records[-1].id == "25000"
    redis_client.delete(*[f"{prefix}{i}" for i in range(1, 25_001)])


def test_redis_down_is_service_unavailable_saying_how_to_start_it() -> None:
    down = redis.Redis(host="127.0.0.1", port=6399, socket_connect_timeout=0.5, retry=None)
    spout = TweetsTransactionalSpout(down)
    for call in (
        lambda: spout.is_ready(None),
        lambda: spout.initialize_transaction(1, None),
        lambda: spout.emit_batch(TransactionAttempt(1, 1), {"v": 1, "from": 1, "quantity": 2}),
        lambda: append_tweets(down, ["x"]),
    ):
        with pytest.raises(ServiceUnavailable) as info:
            call()
        assert "Redis at 127.0.0.1:6399/0" in str(info.value)
        assert "scripts/services.sh start" in str(info.value)
