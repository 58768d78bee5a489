import pytest

from txdag.state import DefaultKeyCodec, JoinedKeyCodec


@pytest.mark.parametrize(
    "key,field",
    [(("hello",), "hello"), (("@bob", "#storm"), '["@bob","#storm"]'), ((3,), "[3]"), (("[x",), '["[x"]'),
     (("naïve",), "naïve"), (("",), ""), (("a", None), '["a",null]')],
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
