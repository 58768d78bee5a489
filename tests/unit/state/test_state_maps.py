"""Map-state txid rules over the in-memory backing map (Storm's StateTest and seed 004's examples run over every
backing map: tests/integration/state/test_map_contract.py)."""

import pytest

from txdag.errors import TxidOrderError
from txdag.state import (
    CachedMap,
    MemoryBackingMap,
    OpaqueMap,
    OpaqueValue,
    SnapshottableMap,
    TransactionalMap,
    TransactionalValue,
    combine_sum,
)


def get(state, key):
    return state.multi_get([(key,)])[0]


def add(state, key, amount):
    return state.multi_update([(key,)], [combine_sum(amount)])[0]


def test_begin_commit_refuses_to_go_back_and_commit_needs_the_open_batch():
    state = TransactionalMap(MemoryBackingMap())
    state.begin_commit(3)
    with pytest.raises(ValueError, match="commit\\(4\\) without begin_commit\\(4\\)"):
        state.commit(4)
    state.commit(3)
    with pytest.raises(TxidOrderError, match="txid 2 is behind the stored txid 3"):
        state.begin_commit(2)
    with pytest.raises(ValueError, match="begin_commit"):
        add(state, "a", 1)


def test_multi_put_replaces_values_with_txid_rules():
    state = OpaqueMap(MemoryBackingMap())
    state.begin_commit(1)
    state.multi_put([("a",), ("b",)], [10, 20])
    state.commit(1)
    state.begin_commit(2)
    state.multi_put([("a",)], [11])
    state.commit(2)
    assert state.backing.data[("a",)] == OpaqueValue(2, 11, 10)
    assert state.backing.data[("b",)] == OpaqueValue(1, 20, None)


def test_keys_must_be_tuples():
    state = TransactionalMap(MemoryBackingMap())
    with pytest.raises(TypeError, match="tuples of grouping-field values"):
        state.multi_get(["hello"])


def test_snapshottable_map_keeps_a_global_aggregate_under_one_key():
    state = SnapshottableMap(OpaqueMap(MemoryBackingMap()))
    state.begin_commit(1)
    assert state.get() is None
    assert state.update(combine_sum(7)) == 7
    state.commit(1)
    state.begin_commit(2)
    state.set(100)
    assert state.get() == 100
    state.commit(2)
    assert state.delegate.backing.data[("$GLOBAL$",)] == OpaqueValue(2, 100, 7)


def test_cached_map_serves_hot_keys_from_memory_and_evicts_the_least_recent():
    backing = MemoryBackingMap()
    cached = CachedMap(backing, cache_size=2)
    cached.multi_put([("a",), ("b",)], [1, 2])
    backing.data[("a",)] = 99  # behind the cache's back: a cached read does not see it
    assert cached.multi_get([("a",), ("b",)]) == [1, 2]
    assert (cached.hits, cached.misses) == (2, 0)
    cached.multi_get([("c",)])  # evicts the least recently used key, "a"
    assert cached.multi_get([("a",)]) == [99]
    assert cached.misses == 2
    assert cached.multi_get([("x",), ("y",), ("z",), ("x",)]) == [None, None, None, None]


def test_map_states_work_over_a_cached_map():
    state = TransactionalMap(CachedMap(MemoryBackingMap(), cache_size=10))
    state.begin_commit(1)
    add(state, "a", 2)
    state.commit(1)
    state.begin_commit(1)
    assert add(state, "a", 2) == 2
    state.commit(1)


class Transactions(MemoryBackingMap):
    """A backing map with transactions of its own (docs/stores.md): it records when the map state opens and ends
    them."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def begin_commit(self, txid):
        self.calls.append(("begin", txid))

    def commit(self, txid):
        self.calls.append(("commit", txid))

    def multi_put(self, keys, values):
        self.calls.append(("put", len(keys)))
        super().multi_put(keys, values)


def test_a_backing_map_with_transactions_gets_one_around_each_txids_writes():
    from txdag.state.combine_apply import apply_combined

    backing = Transactions()
    state = OpaqueMap(backing)
    apply_combined(state, 1, {'["a"]': 1, '["b"]': 2, '["c"]': 3}, lambda old, new: old + new, chunk_size=2)
    assert backing.calls == [("begin", 1), ("put", 2), ("put", 1), ("commit", 1)]
    assert [v.curr for v in backing.multi_get([("a",), ("b",), ("c",)])] == [1, 2, 3]


def test_a_cached_map_passes_the_stores_transactions_on_and_forgets_a_txid_that_died_inside_one():
    backing = Transactions()
    cached = CachedMap(backing)
    state = TransactionalMap(cached)
    state.begin_commit(1)
    state.multi_put([("a",)], [1])
    state.commit(1)
    state.begin_commit(2)
    state.multi_put([("a",)], [2])  # the try dies here: the store rolls txid 2 back
    backing.multi_put([("a",)], [TransactionalValue(1, 1)])  # (what the rollback leaves)
    state.begin_commit(2)
    assert state.multi_get([("a",)]) == [1], "the cache still held the rolled-back write"
    assert [c for c in backing.calls if c[0] != "put"] == [("begin", 1), ("commit", 1), ("begin", 2), ("begin", 2)]
