"""The Redis layout of the map states and its errors (the contract every backing map keeps: test_map_contract.py)."""

import json

import pytest
import redis
from support.maps import add_all

from txdag.errors import ConfigError, FormatVersionError, ServiceUnavailable, TxidOrderError
from txdag.state import (
    JoinedKeyCodec,
    NonTransactionalMap,
    OpaqueMap,
    RedisBackingMap,
    TransactionalMap,
    TransactionalValue,
    combine_sum,
)


def test_redis_layout_is_readable_with_plain_redis_commands(redis_client, prefix):
    ns = f"{prefix}:users_hashtags"
    state = OpaqueMap(RedisBackingMap(redis_client, ns, key_codec=JoinedKeyCodec(":", 2)))
    add_all(state, 1, {})
    state.begin_commit(1)
    state.multi_update([("@bob", "#storm")], [combine_sum(2)])
    state.commit(1)
    state.begin_commit(2)
    state.multi_update([("@bob", "#storm")], [combine_sum(3)])
    state.commit(2)
    assert redis_client.hget(ns, "@bob:#storm") == b"5"
    assert redis_client.hget(f"{{{ns}}}:txid", "@bob:#storm") == b"2"
    assert redis_client.hget(f"{{{ns}}}:prev", "@bob:#storm") == b"2"
    assert redis_client.hgetall(f"{{{ns}}}:meta") == {b"v": b"1", b"kind": b"opaque"}


def test_multi_get_is_one_round_trip_for_many_keys(redis_client, prefix, monkeypatch):
    backing = RedisBackingMap(redis_client, f"{prefix}:bulk", chunk_size=1000)
    keys = [(f"k{i}",) for i in range(5000)]
    backing.multi_put(keys, [TransactionalValue(1, i) for i in range(5000)])
    calls = []
    original = redis.client.Pipeline.execute
    monkeypatch.setattr(
        redis.client.Pipeline, "execute", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    monkeypatch.setattr(redis.Redis, "execute_command", lambda *a, **k: pytest.fail("a per-key round trip"))
    values = backing.multi_get(keys)
    assert values[4321] == TransactionalValue(1, 4321)
    assert len(calls) == 1


def test_a_namespace_keeps_its_kind(redis_client, prefix):
    ns = f"{prefix}:k"
    add_all(TransactionalMap(RedisBackingMap(redis_client, ns)), 1, {"a": 1})
    with pytest.raises(ConfigError, match="OpaqueMap found TransactionalValue at key \\('a',\\)"):
        add_all(OpaqueMap(RedisBackingMap(redis_client, ns)), 2, {"a": 1})


def test_unknown_format_version_and_garbage_values_are_refused(redis_client, prefix):
    ns = f"{prefix}:v"
    backing = RedisBackingMap(redis_client, ns)
    add_all(TransactionalMap(backing), 1, {"a": 1})
    redis_client.hset(ns, "a", b"\xff\xfe not json")
    with pytest.raises(FormatVersionError, match="field 'a'.*not JSON"):
        backing.multi_get([("a",)])
    redis_client.hset(f"{{{ns}}}:meta", "v", "9")
    with pytest.raises(FormatVersionError, match="format version '9'"):
        backing.multi_get([("a",)])
    with pytest.raises(FormatVersionError, match="format version '9'"):
        backing.multi_put([("a",)], [TransactionalValue(2, 1)])


def test_backwards_txid_in_redis_names_both_txids(redis_client, prefix):
    state = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:b"))
    add_all(state, 5, {"a": 1})
    behind = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:b"))
    behind.begin_commit(3)
    with pytest.raises(TxidOrderError, match="txid 3 is behind the stored txid 5"):
        behind.multi_update([("a",)], [combine_sum(1)])


def test_redis_down_names_the_service_and_how_to_start_it():
    client = redis.Redis(host="127.0.0.1", port=6399, socket_connect_timeout=0.5)
    with pytest.raises(ServiceUnavailable, match="Redis at 127.0.0.1:6399/0 .*scripts/services.sh start"):
        RedisBackingMap(client, "x").multi_get([("a",)])


def test_values_are_json(redis_client, prefix):
    ns = f"{prefix}:j"
    NonTransactionalMap(RedisBackingMap(redis_client, ns)).multi_put([("a",)], [[1, 2.5, "é"]])
    assert json.loads(redis_client.hget(ns, "a")) == [1, 2.5, "é"]
