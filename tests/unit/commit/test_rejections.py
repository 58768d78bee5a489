"""A stored rejection as a row: txdag's record with its time, a record written before the time was kept, and a
value that is not txdag's at all (shown, never a failed listing)."""

from __future__ import annotations

import json

from txdag.commit.rejections import rejection_row, rejections_key


def test_a_record_reads_as_a_row_with_its_time() -> None:
    raw = json.dumps({"txid": 3, "attempt": 2, "partition": "s:0", "reason": "late", "at": "2026-11-24T12:00:00Z"})
    assert rejection_row(b"1795-0", raw.encode()) == {"id": "1795-0", "txid": 3, "attempt": 2, "partition": "s:0",
                                                       "reason": "late", "at": "2026-11-24T12:00:00Z"}


def test_an_older_record_without_a_time_still_reads() -> None:
    row = rejection_row("8", json.dumps({"txid": 1, "attempt": 1, "partition": None, "reason": "not UTF-8"}))
    assert (row["id"], row["txid"], row["reason"], row["at"]) == ("8", 1, "not UTF-8", None)


def test_a_value_that_is_not_a_record_is_shown_as_such() -> None:
    for raw in (b"garbage", b"[1, 2]", b"\xff"):
        row = rejection_row(b"9", raw)
        assert row["id"] == "9" and row["txid"] is None and row["reason"].startswith("<not a txdag rejection record")


def test_the_key_names_the_topology_in_a_hash_tag() -> None:
    assert rejections_key("tweets") == "txdag:rejected:{tweets}"
