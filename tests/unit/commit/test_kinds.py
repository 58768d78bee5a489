"""The table of output kinds: each kind once, with how its staged values are read and its applier; the seal knows
no other kind."""

import json

import pytest

from txdag.attempt import TransactionAttempt
from txdag.commit import apply, kinds
from txdag.commit.kinds import KINDS, KV, SUM, OutputKind, apply_outputs, decode_number
from txdag.commit.outputs import OutputSpec, decode_seal, encode_seal
from txdag.errors import FormatVersionError


def test_every_kind_has_an_applier_and_a_decoder_and_is_named_once():
    assert list(KINDS) == ["combine", "window", "persist", "sink", "kv", "sum"]
    for name, kind in KINDS.items():
        assert kind.name == name and callable(kind.apply) and callable(kind.decode)
    assert [k.name for k in KINDS.values() if not k.in_staging] == [KV]  # staged in the key-value state's namespace
    assert [k.name for k in KINDS.values() if k.in_redis] == [SUM]  # added inside Redis at the commit


def test_staged_values_decode_as_their_kind_stages_them():
    assert KINDS[SUM].decode(b"3") == 3 and KINDS[SUM].decode(b"0.5") == 0.5
    assert KINDS[SUM].decode(b"inf") == float("inf")  # as Python's repr stages an infinite partial
    assert KINDS["combine"].decode(b'{"n": 2}') == {"n": 2}
    assert KINDS["window"].decode(b'[1.5, "a", 3]') == [1.5, "a", 3]
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
            return len(outputs), 1
        return apply_kind

    table = {name: OutputKind(name, recorder(name)) for name in KINDS}
    monkeypatch.setattr(kinds, "KINDS", table)
    outputs = {"b": (OutputSpec(SUM, 1), "key"), "a": (OutputSpec("window", 2), {}), "c": (OutputSpec(SUM, 0), "k")}
    ctx = apply.CommitContext("t", TransactionAttempt(1, 1), None, {})
    assert apply_outputs(ctx, outputs) == (3, 6)  # one skipped per kind (6 kinds), one applied per output
    assert calls == [("combine", []), ("window", ["a"]), ("persist", []), ("sink", []), ("kv", []),
                     ("sum", ["b", "c"])]
