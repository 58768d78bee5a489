"""The Airflow demo's check compares key tuples (each stored field decoded by its state's codec), not joined
strings: a count of ("@a", "#b:#c") stored under "@a:#b:#c" is told apart from ("@a:#b", "#c"), which the codec
refuses (a rejection, never stored)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from demo_airflow import CODECS, compare  # noqa: E402  (scripts/demo_airflow.py, run by scripts/demo.sh)

PAIRS = CODECS["users_hashtags"]


def test_the_stored_fields_match_the_recount_key_by_key_with_the_refused_key_left_out() -> None:
    truth = {("@a", "#b:#c"): 1, ("@a:#b", "#c"): 1, ("@ann", "#x"): 3}
    assert compare(PAIRS, {b"@a:#b:#c": b"1", b"@ann:#x": b"3"}, truth) == ({}, 2, 1)


def test_two_keys_added_into_one_field_are_a_difference_not_a_match() -> None:
    """What a state held before keys were checked: both pairs added under "@a:#b:#c"; the check names the key
    that is off, ("@a", "#b:#c"), stored 2 and counted 1."""
    truth = {("@a", "#b:#c"): 1, ("@a:#b", "#c"): 1}
    assert compare(PAIRS, {b"@a:#b:#c": b"2"}, truth) == ({("@a", "#b:#c"): (2, 1)}, 1, 1)


def test_a_missing_and_an_extra_key_are_differences() -> None:
    wrong, counted, refused = compare(PAIRS, {b"@x:#y": b"1"}, {("@ann", "#x"): 3})
    assert wrong == {("@x", "#y"): (1, None), ("@ann", "#x"): (None, 3)} and (counted, refused) == (1, 0)
