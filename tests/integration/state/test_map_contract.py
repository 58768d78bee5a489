"""One contract suite, every backing map txdag ships or documents (issue 33 item 6): the map states' txid rules,
Storm's StateTest scenarios and seed 004's worked examples over memory, Redis, Redis Cluster, PostgreSQL (with and
without CachedMap in front) and the guide's example store (examples/sqlite_store.py). A backing map only gets and
puts what the map state gives it, so each scenario must end the same over every one of them."""

import random

import psycopg
import pytest
from support.examples import example_module
from support.maps import add_all, stored
from support.postgres import close_sessions, postgres_url

from txdag.airflow.stores import PostgresStore
from txdag.errors import TxidOrderError
from txdag.state import (
    CachedMap,
    MemoryBackingMap,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    RedisBackingMap,
    TransactionalMap,
    TransactionalValue,
    combine_sum,
)
from txdag.state.kv import make_client, parse_provider_config

BACKINGS = ["memory", "redis", "cached-redis", "redis_cluster", "postgres", "cached-postgres", "sqlite"]


@pytest.fixture(params=BACKINGS)
def backing(request, redis_client, prefix, tmp_path):
    """A fresh, empty backing map of each kind; what it wrote is removed afterwards."""
    name = request.param
    if name == "memory":
        yield MemoryBackingMap()
    elif name in ("redis", "cached-redis"):
        redis_map = RedisBackingMap(redis_client, f"{prefix}:words", chunk_size=7)
        yield redis_map if name == "redis" else CachedMap(redis_map, cache_size=5)
    elif name == "redis_cluster":
        client = make_client(parse_provider_config("redis_cluster", request.getfixturevalue("redis_cluster").config()))
        yield RedisBackingMap(client, f"{prefix}:words", chunk_size=7)
        for key in list(client.scan_iter(match=f"*{prefix}*", count=1000)):
            client.delete(key)
        client.close()
    elif name in ("postgres", "cached-postgres"):
        conn_id = request.getfixturevalue("postgres_conn")
        pg_map = PostgresStore(conn_id, schema=prefix).backing_map(prefix, "words", 1)
        yield pg_map if name == "postgres" else CachedMap(pg_map, cache_size=5)
        close_sessions()
        with psycopg.connect(postgres_url(), autocommit=True) as db:
            db.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')
    else:
        yield example_module("sqlite_store").SqliteStore(str(tmp_path / "states.db")).backing_map(prefix, "words", 1)


def get(state, key):
    return state.multi_get([(key,)])[0]


def add(state, key, amount):
    return state.multi_update([(key,)], [combine_sum(amount)])[0]


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_replays_never_double_count(backing, kind):
    state = kind(backing)
    rng = random.Random(7)
    truth: dict[str, int] = {}
    for txid in range(1, 30):
        batch = {f"w{rng.randrange(20)}": rng.randrange(1, 5) for _ in range(rng.randrange(1, 12))}
        if kind is OpaqueMap and rng.random() < 0.5:  # a first attempt whose partials are later replaced
            add_all(state, txid, {word: 100 for word in batch})
        add_all(state, txid, batch)
        if kind is TransactionalMap and rng.random() < 0.5:  # a replay of the very same batch
            add_all(state, txid, batch)
        for word, n in batch.items():
            truth[word] = truth.get(word, 0) + n
    state.begin_commit(30)
    keys = [(w,) for w in sorted(truth)]
    assert dict(zip(sorted(truth), state.multi_get(keys))) == truth
    state.commit(30)
    held = [v.value if kind is TransactionalMap else v.curr for v in stored(backing, keys)]
    assert dict(zip(sorted(truth), held)) == truth


def test_transactional_map_golden_scenario(backing):
    state = TransactionalMap(backing)
    assert add_all(state, 1, {"a": 1}) == [1]
    assert add_all(state, 1, {"a": 1}) == [1]
    assert add_all(state, 2, {"a": 3, "b": 1}) == [4, 1]
    assert stored(backing, [("a",), ("b",), ("c",)]) == [TransactionalValue(2, 4), TransactionalValue(2, 1), None]


def test_opaque_map_golden_scenario(backing):
    state = OpaqueMap(backing)
    add_all(state, 1, {"a": 5})
    add_all(state, 2, {"a": 1})
    add_all(state, 2, {"a": 2})
    assert stored(backing, [("a",)]) == [OpaqueValue(2, 7, 5)]


def test_non_transactional_map_keeps_plain_values_and_counts_a_replay_twice(backing):
    state = NonTransactionalMap(backing)
    add_all(state, 1, {"a": 5})
    state.begin_commit(1)
    state.multi_put([("b",)], [{"nested": [1, "x"]}])
    state.commit(1)
    add_all(state, 1, {"a": 5})  # seed 004: a non-transactional state has no txid to skip a replay by
    assert stored(backing, [("a",), ("b",)]) == [10, {"nested": [1, "x"]}]


def test_storm_opaque_map_scenario(backing):
    state = OpaqueMap(backing)
    state.begin_commit(1)
    assert get(state, "a") is None
    assert add(state, "a", 1) == 1  # intra-batch reads see this batch's earlier updates
    assert get(state, "a") == 1
    assert add(state, "a", 2) == 3
    assert get(state, "a") == 3
    state.commit(1)
    state.begin_commit(1)  # a replay of txid 1 with a different batch starts from the value before 1
    assert get(state, "a") is None
    assert add(state, "a", 2) == 2
    state.commit(1)
    state.begin_commit(2)
    assert get(state, "a") == 2
    assert add(state, "a", 3) == 5
    assert add(state, "a", 1) == 6
    state.commit(2)
    assert stored(backing, [("a",)]) == [OpaqueValue(2, 6, 2)]


def test_storm_transactional_map_scenario(backing):
    state = TransactionalMap(backing)
    state.begin_commit(1)
    assert get(state, "a") is None
    assert add(state, "a", 1) == 1
    assert add(state, "a", 2) == 3
    state.commit(1)
    state.begin_commit(1)  # a replay of txid 1: the same batch is already in the value
    assert get(state, "a") == 3
    assert add(state, "a", 1) == 3
    assert add(state, "a", 2) == 3
    state.commit(1)
    state.begin_commit(2)
    assert get(state, "a") == 3
    assert add(state, "a", 3) == 6
    assert add(state, "a", 1) == 7
    state.commit(2)
    assert stored(backing, [("a",)]) == [TransactionalValue(2, 7)]


def test_seed_004_transactional_example(backing):
    """Seed 004: man = [count=3, txid=1], dog = [count=4, txid=3], apple = [count=10, txid=2]; batch 3 holds
    "man", "man", "dog": man becomes [5, 3], dog stays [4, 3] (txid 3 is in it already), apple is untouched."""
    state = TransactionalMap(backing)
    for txid, word, count in ((1, "man", 3), (2, "apple", 10), (3, "dog", 4)):
        state.begin_commit(txid)
        state.multi_put([(word,)], [count])
        state.commit(txid)
    state.begin_commit(3)
    state.multi_update([("man",), ("dog",)], [combine_sum(2), combine_sum(1)])
    state.commit(3)
    assert stored(backing, [("man",), ("dog",), ("apple",)]) == [
        TransactionalValue(3, 5), TransactionalValue(3, 4), TransactionalValue(2, 10)]


def test_seed_004_opaque_example(backing):
    """Seed 004: { value = 4, prevValue = 1, txid = 2 }; batch 3 adds 2: { 6, 4, 3 }; batch 3 replayed with
    another batch that adds 3: { 7, 4, 3 }, from prevValue, not from the value the first try left."""
    state = OpaqueMap(backing)
    for txid, amount in ((1, 1), (2, 3)):
        add_all(state, txid, {"w": amount})
    assert stored(backing, [("w",)]) == [OpaqueValue(2, 4, 1)]
    add_all(state, 3, {"w": 2})
    assert stored(backing, [("w",)]) == [OpaqueValue(3, 6, 4)]
    add_all(state, 3, {"w": 3})
    assert stored(backing, [("w",)]) == [OpaqueValue(3, 7, 4)]


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_a_stored_txid_ahead_of_the_batch_is_an_error_naming_both(backing, kind):
    add_all(kind(backing), 5, {"a": 1})
    behind = kind(backing)  # e.g. a second committer that is behind
    behind.begin_commit(4)
    with pytest.raises(TxidOrderError, match="txid 4 is behind the stored txid 5"):
        add(behind, "a", 1)
