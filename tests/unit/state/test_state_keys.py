import itertools

import pytest

from txdag.state import DefaultKeyCodec, JoinedKeyCodec, KeyClashError


@pytest.mark.parametrize(
    "key,field",
    [(("hello",), "hello"), (("@bob", "#storm"), '["@bob","#storm"]'), ((3,), "[3]"), (("[x",), '["[x"]'),
     (("naïve",), "naïve"), (("",), ""), (("a", None), '["a",null]'), (("a:b", "c"), '["a:b","c"]'),
     (("a", "b:c"), '["a","b:c"]')],
)
def test_default_codec_round_trips(key, field):
    codec = DefaultKeyCodec()
    assert codec.encode(key) == field
    assert codec.decode(field) == key


def test_joined_codec_writes_seed_000_user_hashtag_fields():
    codec = JoinedKeyCodec(":", 2)
    assert codec.encode(("@bob", "#storm")) == "@bob:#storm"
    assert codec.decode("@bob:#storm") == ("@bob", "#storm")
    with pytest.raises(ValueError, match="tuples of 2 strings"):
        codec.encode(("@bob",))


def test_joined_codec_refuses_a_separator_before_the_last_field_so_no_two_keys_share_a_field():
    codec = JoinedKeyCodec(":", 2)
    assert codec.encode(("a", "b:c")) == "a:b:c"  # the last field may hold it: nothing is cut after it
    with pytest.raises(KeyClashError, match=r"key field 0 'a:b' of \('a:b', 'c'\) contains the separator ':'") as exc:
        codec.encode(("a:b", "c"))
    assert (exc.value.key, exc.value.index, exc.value.sep) == (("a:b", "c"), 0, ":")
    with pytest.raises(KeyClashError, match="key field 1 "):
        JoinedKeyCodec("/", 3).encode(("x", "y/z", "w"))


def test_a_separator_of_several_characters_also_refuses_a_field_ending_with_its_start():
    codec = JoinedKeyCodec("::", 2)
    assert codec.decode("a:::b") == ("a", ":b")  # what ("a:", "b") would read back as
    with pytest.raises(KeyClashError, match="key field 0 'a:' of .* ends with the start of the separator '::'"):
        codec.encode(("a:", "b"))
    with pytest.raises(KeyClashError, match="key field 0 'x::y' of .* contains the separator '::'"):
        codec.encode(("x::y", "b"))
    assert codec.encode(("a", ":b")) == "a:::b"
    assert codec.encode((":a", "b")) == ":a::b"


@pytest.mark.parametrize("sep", [":", "::", "ab", "|"])
@pytest.mark.parametrize("arity", [2, 3])
def test_decode_inverts_encode_and_no_two_encoded_keys_share_a_field(sep, arity):
    codec = JoinedKeyCodec(sep, arity)
    alphabet = ["", "a", "b", ":", "::", "a:", ":a", "ab", "|", "a|b", "#x"]
    fields: dict[str, tuple] = {}
    for key in itertools.product(alphabet, repeat=arity):
        try:
            field = codec.encode(key)
        except KeyClashError:
            continue
        assert codec.decode(field) == key
        assert fields.setdefault(field, key) == key, f"{key} and {fields[field]} share {field!r}"
    assert len(fields) > len(alphabet)


def test_seed_000_fields_stay_byte_identical_and_fields_stored_before_keep_decoding():
    codec = JoinedKeyCodec(":", 2)
    for user, tag in [("@bob", "#storm"), ("@ann", "#a"), ("@x_1", "#naïve")]:
        assert codec.encode((user, tag)) == f"{user}:{tag}"
    # a field written before the check, whatever tuple it came from, reads back as it always did
    assert codec.decode("a:b:c") == ("a", "b:c")
    assert codec.encode(codec.decode("a:b:c")) == "a:b:c"
