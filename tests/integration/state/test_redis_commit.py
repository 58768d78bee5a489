"""The server-side commit script: same results as the Python map states, idempotent replays, chunking."""

import random

import pytest
import redis

from txdag.errors import ConfigError, TxdagError, TxidOrderError
from txdag.state import (
    EncodedPartials,
    JoinedKeyCodec,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    RedisBackingMap,
    StateKind,
    TransactionalMap,
    TransactionalValue,
    apply_encoded,
    apply_partials,
    combine_sum,
)

KINDS = [TransactionalMap, OpaqueMap, NonTransactionalMap]


def python_apply(state, txid, partials):
    state.begin_commit(txid)
    state.multi_update(list(partials), [combine_sum(d) for d in partials.values()])
    state.commit(txid)


def random_batches(seed, n=25):
    rng = random.Random(seed)
    return [{(f"k{rng.randrange(40)}",): rng.randrange(1, 9) for _ in range(rng.randrange(0, 30))} for _ in range(n)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunk_size", [1, 3, 5000])
def test_script_matches_the_python_map_state(redis_client, prefix, kind, chunk_size):
    by_script = kind(RedisBackingMap(redis_client, f"{prefix}:script"))
    by_python = kind(RedisBackingMap(redis_client, f"{prefix}:python"))
    for txid, batch in enumerate(random_batches(chunk_size), start=1):
        apply_partials(redis_client, txid, [(by_script, batch)], chunk_size=chunk_size)
        python_apply(by_python, txid, batch)
    keys = [(f"k{i}",) for i in range(40)]
    assert by_script.backing.multi_get(keys) == by_python.backing.multi_get(keys)


def test_replaying_a_transactional_txid_changes_nothing(redis_client, prefix):
    state = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:t"))
    first = apply_partials(redis_client, 1, [(state, {("a",): 2, ("b",): 1})])
    again = apply_partials(redis_client, 1, [(state, {("a",): 2, ("b",): 1})])
    assert (first.applied, first.skipped, again.applied, again.skipped) == (2, 0, 0, 2)
    assert state.backing.multi_get([("a",), ("b",)]) == [TransactionalValue(1, 2), TransactionalValue(1, 1)]


def test_replaying_an_opaque_txid_recomputes_from_prev(redis_client, prefix):
    state = OpaqueMap(RedisBackingMap(redis_client, f"{prefix}:o"))
    apply_partials(redis_client, 1, [(state, {("a",): 1})])
    apply_partials(redis_client, 2, [(state, {("a",): 50})])
    apply_partials(redis_client, 2, [(state, {("a",): 40})])  # txid 2 replayed with a different batch
    assert state.backing.multi_get([("a",)]) == [OpaqueValue(2, 41, 1)]


@pytest.mark.parametrize("kind", [TransactionalMap, OpaqueMap])
def test_a_crash_between_chunks_then_a_rerun_equals_a_clean_run(redis_client, prefix, kind):
    """Chunks 1..k landed, the committer died, the rerun applies everything: no key counted twice."""
    crashed = kind(RedisBackingMap(redis_client, f"{prefix}:crashed"))
    clean = kind(RedisBackingMap(redis_client, f"{prefix}:clean"))
    for txid, batch in enumerate(random_batches(11), start=1):
        items = list(batch.items())
        partial = dict(items[: len(items) // 2])
        apply_partials(redis_client, txid, [(crashed, partial)], chunk_size=2)  # the part that landed
        apply_partials(redis_client, txid, [(crashed, batch)], chunk_size=2, marker_key=f"{prefix}:m")
        apply_partials(redis_client, txid, [(clean, batch)])
    keys = [(f"k{i}",) for i in range(40)]
    assert crashed.backing.multi_get(keys) == clean.backing.multi_get(keys)


def test_seed_000_commit_several_states_with_the_marker_in_one_step(redis_client, prefix):
    users = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}users"))
    pairs = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}users_hashtags", key_codec=JoinedKeyCodec()))
    marker = f"{prefix}LAST_COMMITED_TRANSACTION"
    partials = [(users, {("@bob",): 2}), (pairs, {("@bob", "#storm"): 1})]
    result = apply_partials(redis_client, 1, partials, marker_key=marker, extra={f"{prefix}NEXT_READ": "11"})
    assert (result.applied, result.already_committed) == (2, False)
    assert redis_client.hget(f"{prefix}users", "@bob") == b"2"
    assert redis_client.hget(f"{prefix}users_hashtags", "@bob:#storm") == b"1"
    assert redis_client.get(marker) == b"1" and redis_client.get(f"{prefix}NEXT_READ") == b"11"
    again = apply_partials(redis_client, 1, partials, marker_key=marker)
    assert (again.applied, again.already_committed) == (0, True)
    assert redis_client.hget(f"{prefix}users", "@bob") == b"2"


def test_marker_and_extra_keys_are_written_with_the_last_chunk_only(redis_client, prefix, monkeypatch):
    state = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:c"))
    marker, cursor = f"{prefix}:marker", f"{prefix}:cursor"
    seen = []
    original = redis.commands.core.Script.__call__

    def spy(self, keys=(), args=(), client=None):
        seen.append((redis_client.get(marker), redis_client.get(cursor)))
        return original(self, keys=keys, args=args, client=client)

    monkeypatch.setattr(redis.commands.core.Script, "__call__", spy)
    partials = {(f"k{i}",): 1 for i in range(10)}
    result = apply_partials(redis_client, 1, [(state, partials)], chunk_size=3, marker_key=marker, extra={cursor: "9"})
    assert result.chunks == 4 and len(seen) == 4, "one script call per chunk"
    assert seen == [(None, None)] * 4
    assert (redis_client.get(marker), redis_client.get(cursor)) == (b"1", b"9")


def test_an_empty_batch_still_records_the_commit(redis_client, prefix):
    marker = f"{prefix}:marker"
    result = apply_encoded(redis_client, 4, [], marker_key=marker)
    assert (result.applied, result.chunks, redis_client.get(marker)) == (0, 1, b"4")


def test_floats_and_integers_add_exactly(redis_client, prefix):
    state = NonTransactionalMap(RedisBackingMap(redis_client, f"{prefix}:f"))
    big = 2**62
    apply_partials(redis_client, 1, [(state, {("i",): big, ("x",): 0.5})])
    apply_partials(redis_client, 2, [(state, {("i",): 1, ("x",): 2})])
    assert state.backing.multi_get([("i",), ("x",)]) == [big + 1, 2.5]


def test_script_errors_say_what_is_wrong(redis_client, prefix):
    ns = f"{prefix}:e"
    apply_encoded(redis_client, 5, [EncodedPartials(ns, StateKind.TRANSACTIONAL, {"a": 1})])
    with pytest.raises(TxidOrderError, match="txid 4 is behind the stored txid 5 at state .* field 'a'"):
        apply_encoded(redis_client, 4, [EncodedPartials(ns, StateKind.TRANSACTIONAL, {"a": 1})])
    with pytest.raises(ConfigError, match="holds state of kind transactional, not opaque"):
        apply_encoded(redis_client, 6, [EncodedPartials(ns, StateKind.OPAQUE, {"a": 1})])
    redis_client.hset(ns, "b", '"text"')
    with pytest.raises(TxdagError, match="field 'b' is not a number"):
        apply_encoded(redis_client, 6, [EncodedPartials(ns, StateKind.TRANSACTIONAL, {"b": 1})])
    with pytest.raises(TypeError, match="partials are numbers"):
        apply_encoded(redis_client, 6, [EncodedPartials(ns, StateKind.TRANSACTIONAL, {"a": "1"})])
