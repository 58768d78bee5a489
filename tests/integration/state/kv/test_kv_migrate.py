"""``txdag state migrate`` as a library call against real servers (both providers): base64 (Storm <= 1.1's
representation) to json in place, interrupted and resumed, each value converted exactly once."""

from __future__ import annotations

import pytest

from txdag.attempt import TransactionAttempt as Tx
from txdag.luascripts import run
from txdag.state import KeyValueState
from txdag.state.kv import (
    DELETE,
    KVNamespace,
    KVStateError,
    commit,
    get_serializer,
    migrate,
    prepare,
    scripts,
    seal_stage,
    stage_writes,
    status,
)
from txdag.state.kv.errors import KeyCollision

N = 1000


def original(i: int):
    return [i, {"n": i, "s": f"v{i}"}, f"text {i}", [i, [i + 1]], 1.5 * i][i % 5]


def legacy_namespace(client, name: str) -> tuple[KVNamespace, dict]:
    """N committed values written with the base64 flavour, plus a sealed staged attempt of the next txid."""
    spec = KVNamespace(name, "base64", "base64")
    s = KeyValueState(client, spec)
    truth = {}
    for i in range(N):
        key = f"k{i}" if i % 3 else ("tuple", i)
        s.put(key, original(i))
        truth[key] = original(i)
    s.prepare_commit(1)
    s.commit(1)
    staged = [("k1", "new"), ("k2", DELETE), ("fresh", {"x": 1})]
    seal_stage(client, spec, Tx(2, 1), stage_writes(client, spec, Tx(2, 1), staged))
    return spec, truth


class Stop(Exception):
    pass


def test_migrate_base64_to_json_interrupted_twice_then_resumed(kv_provider, prefix):
    client = kv_provider.client
    spec, truth = legacy_namespace(client, f"{prefix}:legacy")
    total = N + 3
    first = migrate(client, spec.namespace, "json", "json", chunk=100, max_chunks=3)
    assert first.outcome == "interrupted" and 0 < first.moved < total and first.remaining == total - first.moved
    for serializers in (("base64", "base64"), ("json", "json")):
        with pytest.raises(KVStateError, match="is being migrated to serializers json,json"):
            KeyValueState(client, spec.namespace, key_serializer=serializers[0], value_serializer=serializers[1])
    with pytest.raises(KVStateError, match="being migrated"):
        prepare(client, spec, Tx(2, 1))
    with pytest.raises(KVStateError, match="being migrated to serializers json,json"):
        migrate(client, spec.namespace, "json", "utf8")

    seen = []

    def stop_after_two(done: int, of: int, key: str) -> None:  # an operator's Ctrl-C, mid-run
        seen.append((done, of))
        if len(seen) == 2:
            raise Stop()

    with pytest.raises(Stop):
        migrate(client, spec.namespace, "json", "json", chunk=100, progress=stop_after_two)
    assert seen[0][1] == total and seen[0][0] > first.moved
    converted_so_far = status(client, spec).moved
    assert first.moved < converted_so_far < total

    # a chunk sent again (a crash after the script ran, before the run noticed) converts nothing
    moved_field, moved_value = next(iter(client.hscan_iter(f"{spec.committed}:migrating", count=10)))
    b64_keys, json_keys = get_serializer("base64", for_keys=True), get_serializer("json", for_keys=True)
    old_field = b64_keys.encode(json_keys.decode(moved_field))
    old_value = get_serializer("base64").encode(get_serializer("json").decode(moved_value))
    replay = run(client, scripts.MIGRATE_MOVE, [spec.meta, spec.committed, f"{spec.committed}:migrating"],
                 [spec.namespace, "json,json", old_field, old_value, moved_field, moved_value])
    assert replay == [0, 1]
    # a chunk whose second field would land on a converted key is refused before it moves its first field
    (f1, v1), (f2, v2) = [pair for pair, _ in zip(client.hscan_iter(spec.committed, count=10), range(2))]
    converted_before = client.hlen(f"{spec.committed}:migrating")
    with pytest.raises(KeyCollision, match="two keys would merge") as collision:
        run(client, scripts.MIGRATE_MOVE, [spec.meta, spec.committed, f"{spec.committed}:migrating"],
            [spec.namespace, "json,json", f1, v1, b"fresh-field", b"1", f2, v2, moved_field, b"2"])
    assert collision.value.index == 1, "the second group of the chunk collides"
    assert client.hget(spec.committed, f1) == v1 and client.hget(f"{spec.committed}:migrating", b"fresh-field") is None
    assert client.hlen(f"{spec.committed}:migrating") == converted_before

    steps = []
    last = migrate(client, spec.namespace, "json", "json", chunk=100, progress=lambda d, t, k: steps.append((d, t)))
    assert last.outcome == "migrated" and last.remaining == 0
    assert first.moved + (converted_so_far - first.moved) + last.moved == total == last.total_moved
    assert steps[-1] == (total, total)

    after = KeyValueState(client, spec.namespace)  # json, json: readable with the new serializers
    assert dict(after.items()) == truth
    st = status(client, spec)
    assert (st.key_serializer, st.value_serializer, st.migrating, st.moved) == ("json", "json", None, 0)
    assert client.exists(f"{spec.committed}:migrating") == 0
    json_spec = KVNamespace(spec.namespace)
    prepare(client, json_spec, Tx(2, 1))  # the staged attempt was converted too
    commit(client, json_spec, 2)
    expected = {**truth, "k1": "new", "fresh": {"x": 1}}
    del expected["k2"]
    assert dict(KeyValueState(client, spec.namespace).items()) == expected
    assert migrate(client, spec.namespace, "json", "json").outcome == "nothing to do"


def test_migrate_refuses_a_prepared_txid_and_a_namespace_it_does_not_know(kv_provider, prefix):
    client = kv_provider.client
    spec = KVNamespace(f"{prefix}:prep", "base64", "base64")
    seal_stage(client, spec, Tx(1, 1), stage_writes(client, spec, Tx(1, 1), [("a", 1)]))
    prepare(client, spec, Tx(1, 1))
    with pytest.raises(KVStateError, match="txid 1 is prepared but not committed; a migration would convert half"):
        migrate(client, spec.namespace, "json", "json")
    commit(client, spec, 1)
    assert migrate(client, spec.namespace, "json", "json").outcome == "migrated"
    with pytest.raises(KVStateError, match="no record of its serializers"):
        migrate(client, f"{prefix}:unknown", "json", "json")


def test_migrate_a_namespace_written_before_txdag_kept_a_record(kv_provider, prefix):
    """Storm <= 1.1 left Base64 strings and no txdag meta: name the old serializers once."""
    client = kv_provider.client
    spec = KVNamespace(f"{prefix}:storm")
    b64 = get_serializer("base64")
    client.hset(spec.committed, mapping={b64.encode(f"w{i}"): b64.encode(i) for i in range(50)})
    result = migrate(client, spec.namespace, "json", "json", from_key_serializer="base64",
                     from_value_serializer="base64", chunk=7)
    assert (result.outcome, result.moved) == ("migrated", 50)
    assert dict(KeyValueState(client, spec.namespace).items()) == {f"w{i}": i for i in range(50)}


def test_a_value_that_does_not_decode_stops_the_migration_and_a_rerun_finishes(kv_provider, prefix):
    client = kv_provider.client
    spec = KVNamespace(f"{prefix}:garbage", "json", "base64")
    s = KeyValueState(client, spec)
    for i in range(20):
        s.put(f"k{i}", i)
    s.prepare_commit(1)
    s.commit(1)
    client.hset(spec.committed, b'"bad"', b"%%% not base64")
    with pytest.raises(KVStateError, match=r"field b'\"bad\"' .* cannot be converted from json,base64 to json,json"):
        migrate(client, spec.namespace, "json", "json", chunk=1000)
    client.hdel(spec.committed, b'"bad"')
    assert migrate(client, spec.namespace, "json", "json").outcome == "migrated"
    assert dict(KeyValueState(client, spec.namespace).items()) == {f"k{i}": i for i in range(20)}


def test_two_keys_that_would_merge_stop_the_migration_untouched(kv_provider, prefix):
    """Another writer stored one JSON key twice, spelt differently: canonical JSON would merge them."""
    client = kv_provider.client
    spec = KVNamespace(f"{prefix}:merge")
    s = KeyValueState(client, spec)
    for i in range(30):
        s.put(f"k{i}", i)
    s.prepare_commit(1)
    s.commit(1)
    client.hset(spec.committed, mapping={b'{"a":1}': b"1", b'{ "a": 1 }': b"2"})
    with pytest.raises(KVStateError, match="both become one key under base64,json: two keys would merge"):
        migrate(client, spec.namespace, "base64", "json", chunk=1000)
    st = status(client, spec)
    assert st.moved == client.hlen(f"{spec.committed}:migrating") and st.committed_keys + st.moved == 32
    client.hdel(spec.committed, b'{ "a": 1 }')
    assert migrate(client, spec.namespace, "base64", "json", chunk=5).total_moved == 31
    reader = KeyValueState(client, spec.namespace, key_serializer="base64")
    assert reader.get({"a": 1}) == 1 and reader.get("k29") == 29
