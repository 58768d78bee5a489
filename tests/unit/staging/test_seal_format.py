"""The staging seal's format: version 1 for numeric partials only, version 2 once another output kind is staged."""

import json

import pytest

from txdag.errors import FormatVersionError
from txdag.staging.format import COMBINE, FORMATS, SUM, OutputSpec, decode_seal, encode_seal


def test_a_seal_of_sums_only_keeps_version_1_that_older_readers_know():
    seal = encode_seal({"users": OutputSpec(SUM, 3), "hashtags": OutputSpec(SUM, 0)}, FORMATS)
    assert seal == {"v": "1", "users": "3", "hashtags": "0"}
    assert decode_seal(seal, "here", FORMATS) == {"users": OutputSpec(SUM, 3), "hashtags": OutputSpec(SUM, 0)}


def test_a_combine_output_makes_version_2_with_its_aggregator_reference():
    ref = {"module": "job", "name": "Longest", "params": {}}
    outputs = {"users": OutputSpec(SUM, 3), "longest": OutputSpec(COMBINE, 2, ref)}
    seal = encode_seal(outputs, FORMATS)
    assert seal["v"] == "2"
    assert json.loads(seal["longest"]) == {"kind": "combine", "count": 2, "ref": ref, "options": {}}
    assert decode_seal(seal, "here", FORMATS) == outputs


def test_no_seal_is_none_and_unknown_versions_or_entries_are_refused():
    assert decode_seal({}, "here", FORMATS) is None
    with pytest.raises(FormatVersionError, match="staging seal of txid 3 has format version '9'"):
        decode_seal({"v": "9"}, "txid 3", FORMATS)
    with pytest.raises(FormatVersionError, match="entry 'users' is malformed"):
        decode_seal({"v": "2", "users": "not json"}, "txid 3", FORMATS)
    with pytest.raises(FormatVersionError, match="count of 'users' is 'x'"):
        decode_seal({"v": "1", "users": "x"}, "txid 3", FORMATS)
