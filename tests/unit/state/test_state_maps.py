"""Map-state txid rules over the in-memory backing map: Storm's StateTest and seed 004's examples."""

import pytest

from txdag.errors import TxidOrderError
from txdag.state import (
    CachedMap,
    MemoryBackingMap,
    NonTransactionalMap,
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


def test_storm_opaque_map_scenario():
    state = OpaqueMap(MemoryBackingMap())
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
    assert state.backing.data[("a",)] == OpaqueValue(2, 6, 2)


def test_storm_transactional_map_scenario():
    state = TransactionalMap(MemoryBackingMap())
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
    assert state.backing.data[("a",)] == TransactionalValue(2, 7)


def test_seed_004_transactional_example():
    backing = MemoryBackingMap()
    backing.data = {("man",): TransactionalValue(1, 3), ("dog",): TransactionalValue(3, 4),
                    ("apple",): TransactionalValue(2, 10)}
    state = TransactionalMap(backing)
    state.begin_commit(3)
    state.multi_update([("man",), ("dog",)], [combine_sum(2), combine_sum(1)])  # batch: man, man, dog
    state.commit(3)
    assert backing.data == {("man",): TransactionalValue(3, 5), ("dog",): TransactionalValue(3, 4),
                            ("apple",): TransactionalValue(2, 10)}


def test_non_transactional_map_counts_a_replay_twice():
    state = NonTransactionalMap(MemoryBackingMap())
    for _ in range(2):
        state.begin_commit(1)
        add(state, "a", 5)
        state.commit(1)
    assert get(state, "a") == 10


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_a_stored_txid_ahead_of_the_batch_is_an_error_naming_both(kind):
    state = kind(MemoryBackingMap())
    state.begin_commit(5)
    add(state, "a", 1)
    state.commit(5)
    fresh = kind(state.backing)  # e.g. a second committer that is behind
    fresh.begin_commit(4)
    with pytest.raises(TxidOrderError, match="txid 4 is behind the stored txid 5"):
        add(fresh, "a", 1)


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
