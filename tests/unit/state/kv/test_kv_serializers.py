"""KeyValueState serializers: round trips, refusals of garbage, the registry, the tagged staged writes."""

from __future__ import annotations

import base64

import pytest

from txdag.errors import ConfigError
from txdag.state.kv import DELETE, KVNamespace, SerializationError, get_serializer, register_serializer
from txdag.state.kv.layout import TOMBSTONE, kv_namespace

VALUES = [0, -7, 2**62, 1.5, "hello", "", "é ü 🙂", True, None, [1, "a", [2]], {"b": 1, "a": [None, 2.5]}]


@pytest.mark.parametrize("name", ["json", "base64"])
@pytest.mark.parametrize("value", VALUES)
def test_json_flavours_round_trip_values(name, value):
    s = get_serializer(name)
    assert s.decode(s.encode(value)) == value


@pytest.mark.parametrize("name", ["json", "base64"])
def test_keys_come_back_hashable_as_they_went_in(name):
    keys = get_serializer(name, for_keys=True)
    for key in ["w", ("@bob", "#storm"), ("a", ("b", 1)), 3]:
        assert keys.decode(keys.encode(key)) == key
    assert get_serializer(name).decode(get_serializer(name).encode(("a", 1))) == ["a", 1]  # values stay JSON lists


def test_json_is_canonical_so_equal_keys_are_one_field():
    s = get_serializer("json", for_keys=True)
    assert s.encode({"b": 1, "a": 2}) == s.encode({"a": 2, "b": 1}) == b'{"a":2,"b":1}'
    assert s.encode("é") == '"é"'.encode()


def test_base64_is_json_text_base64_encoded():
    s = get_serializer("base64")
    assert s.encode({"n": 1}) == base64.b64encode(b'{"n":1}')
    assert s.decode(base64.b64encode(b"[1,2]")) == [1, 2]


@pytest.mark.parametrize("value", ["plain", "", "ünï", "a\nb"])
def test_utf8_round_trips_strings(value):
    s = get_serializer("utf8")
    assert s.decode(s.encode(value)) == value and s.encode(value) == value.encode()


@pytest.mark.parametrize("value", [b"", b"\x00\xff-=", bytearray(b"ab"), memoryview(b"cd")])
def test_bytes_round_trip_unchanged(value):
    s = get_serializer("bytes")
    assert s.decode(s.encode(value)) == bytes(value)


@pytest.mark.parametrize(("name", "value"), [
    ("json", object()), ("json", float("nan")), ("json", {1, 2}), ("utf8", 5), ("utf8", b"x"), ("bytes", "x"),
    ("bytes", 3), ("base64", object()),
])
def test_encode_refuses_what_the_serializer_cannot_write(name, value):
    with pytest.raises(SerializationError, match=name):
        get_serializer(name).encode(value)


@pytest.mark.parametrize(("name", "garbage"), [
    ("json", b"{not json"), ("json", b"\xff\xfe"), ("json", b""), ("utf8", b"\xff\xfe"), ("base64", b"!!!not b64"),
    ("base64", base64.b64encode(b"{broken")), ("base64", b"abc"),
])
def test_decode_refuses_garbage(name, garbage):
    with pytest.raises(SerializationError, match=name):
        get_serializer(name).decode(garbage)


def test_unknown_serializer_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown serializer 'kryo'.*base64, bytes, json, utf8"):
        get_serializer("kryo")


def test_register_a_serializer_and_refuse_bad_ones():
    class Upper:
        name = "upper-test"

        def encode(self, obj):
            return str(obj).upper().encode()

        def decode(self, data):
            return data.decode()

    register_serializer(Upper())
    assert get_serializer("upper-test").encode("ab") == b"AB"
    assert KVNamespace("t:s", "upper-test", "upper-test").value_serializer == "upper-test"
    with pytest.raises(ConfigError, match="encode/decode"):
        register_serializer(object())  # type: ignore[arg-type]
    bad = Upper()
    bad.name = "a,b"
    with pytest.raises(ConfigError, match="commas"):
        register_serializer(bad)


def test_staged_writes_are_tagged_so_no_value_passes_for_a_delete():
    for name in ("json", "utf8", "bytes", "base64"):
        spec = KVNamespace("t:s", "json", name)
        sample = {"json": "-", "utf8": "-", "bytes": b"-", "base64": "-"}[name]
        tagged = spec.encode_write(sample)
        assert tagged != TOMBSTONE and spec.decode_write(tagged) == sample
        assert spec.decode_write(spec.encode_write(DELETE)) is DELETE
    empty = KVNamespace("t:s", "json", "bytes").encode_write(b"")
    assert empty != TOMBSTONE and KVNamespace("t:s", "json", "bytes").decode_write(empty) == b""
    with pytest.raises(ConfigError, match="no put/delete tag"):
        KVNamespace("t:s").decode_write(b"1")


def test_namespace_names_and_keys_share_one_hash_tag():
    spec = KVNamespace(kv_namespace("tweets", "counter"))
    assert spec.namespace == "tweets:counter"
    keys = [spec.committed, spec.meta, spec.prepared, spec.stages]
    assert all("{tweets:counter}" in k for k in keys) and len(set(keys)) == 4
    for bad in ("", "a b", "a{b", "x}"):
        with pytest.raises(ConfigError, match="namespace"):
            KVNamespace(bad)
    with pytest.raises(ConfigError, match="unknown serializer"):
        KVNamespace("t:s", value_serializer="nope")
