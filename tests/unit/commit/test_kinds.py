"""The table of output kinds: each kind once, with its applier and its staged format (how its staged values are
read); the seal knows no other kind."""

import json

import pytest

from txdag.attempt import TransactionAttempt
from txdag.commit import apply, kinds
from txdag.commit.kinds import KINDS, KV, SUM, OutputKind, apply_outputs
from txdag.errors import FormatVersionError
from txdag.staging.format import FORMATS, OutputSpec, decode_number, decode_seal, encode_seal


def test_every_kind_has_an_applier_and_a_staged_format_and_is_named_once():
    assert list(KINDS) == ["combine", "window", "persist", "sink", "kv", "sum"]
    assert sorted(FORMATS) == sorted(KINDS)  # a kind the staging can read is a kind the commit can apply
    for name, kind in KINDS.items():
        assert kind.name == name and callable(kind.apply) and callable(FORMATS[name].decode)
    assert [n for n, f in FORMATS.items() if not f.in_staging] == [KV]  # staged in the key-value state's namespace
    assert [n for n, f in FORMATS.items() if f.in_redis] == [SUM]  # added inside Redis at the commit


def test_staged_values_decode_as_their_kind_stages_them():
    assert FORMATS[SUM].decode(b"3") == 3 and FORMATS[SUM].decode(b"0.5") == 0.5
    assert FORMATS[SUM].decode(b"inf") == float("inf")  # as Python's repr stages an infinite partial
    assert FORMATS["combine"].decode(b'{"n": 2}') == {"n": 2}
    assert FORMATS["window"].decode(b'[1.5, "a", 3]') == [1.5, "a", 3]
    assert decode_number(b"-7") == -7


def test_the_sums_are_applied_last_so_the_marker_is_written_after_every_other_output():
    assert list(KINDS)[-1] == SUM and KINDS[SUM].apply is apply.apply_sums


def test_an_unknown_kind_in_a_seal_names_it_the_state_and_the_txid():
    raw = {"v": "2", "users": json.dumps({"kind": "frobnicate", "count": 1})}
    where = "txid 3 attempt 1 of topology 'tweets'"
    with pytest.raises(FormatVersionError, match=r"txid 3 attempt 1 of topology 'tweets': state 'users' has output "
                                                 r"kind 'frobnicate', which this txdag does not know"):
        decode_seal(raw, where, KINDS)
    with pytest.raises(FormatVersionError, match="state 'users': unknown staged output kind 'frobnicate'"):
        encode_seal({"users": OutputSpec("frobnicate", 1)}, KINDS)


def test_every_kind_in_the_table_round_trips_through_a_seal():
    outputs = {name: OutputSpec(name, i, {"module": "job", "name": "X", "params": {}} if name != SUM else None)
               for i, name in enumerate(KINDS)}
    assert decode_seal(encode_seal(outputs, KINDS), "here", KINDS) == outputs


def test_the_commit_calls_each_kind_once_in_table_order_with_its_outputs(monkeypatch):
    calls = []

    def recorder(name):
        def apply_kind(ctx, outputs):
            calls.append((name, sorted(outputs)))
            return len(outputs), 1, 10 * len(outputs)
        return apply_kind

    table = {name: OutputKind(name, recorder(name)) for name in KINDS}
    monkeypatch.setattr(kinds, "KINDS", table)
    outputs = {"b": (OutputSpec(SUM, 1), "key"), "a": (OutputSpec("window", 2), {}), "c": (OutputSpec(SUM, 0), "k")}
    ctx = apply.CommitContext("t", TransactionAttempt(1, 1), None, {})
    assert apply_outputs(ctx, outputs) == (3, 6, 30)  # one skipped per kind (6 kinds), one applied per output
    assert calls == [("combine", []), ("window", ["a"]), ("persist", []), ("sink", []), ("kv", []),
                     ("sum", ["b", "c"])]
