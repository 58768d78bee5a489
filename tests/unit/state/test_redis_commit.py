"""txdag.state.redis_commit's per-slot apply (a Redis Cluster whose states are in several slots): the script calls
it makes, one state's keys each, in chunks. The script runner is replaced by a recorder: no server is touched."""

from __future__ import annotations

import pytest

from txdag.state import redis_commit
from txdag.state.base import StateKind
from txdag.state.redis_commit import EncodedPartials, _apply_per_slot


class WalkedList(list):
    """A list that counts how many times it is iterated over."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


@pytest.fixture
def calls(monkeypatch):
    made: list[tuple[list[str], list[str]]] = []

    def run(client, script, keys, args, where=""):
        made.append((keys, args))
        return 1, 0  # applied, skipped

    monkeypatch.setattr(redis_commit, "run", run)
    return made


def test_per_slot_apply_calls_each_state_in_chunks_and_walks_the_items_once(calls) -> None:
    a = EncodedPartials("{a}", StateKind.TRANSACTIONAL, {"x": 1, "y": 2, "z": 3})
    b = EncodedPartials("{b}", StateKind.OPAQUE, {"x": 4})
    twin = EncodedPartials("{a}", StateKind.TRANSACTIONAL, {"x": 1, "y": 2, "z": 3})  # equal to a, another object
    unlisted = EncodedPartials("{c}", StateKind.TRANSACTIONAL, {"w": 9})  # among the items, not the partials
    # items interleaved across states: each state's chunks keep the items' order
    items = WalkedList([(a, "x", "1"), (b, "x", "4"), (twin, "q", "7"), (a, "y", "2"), (unlisted, "w", "9"),
                        (a, "z", "3")])
    result = _apply_per_slot(object(), 7, [b, a, twin], items, None, None, 2, None)  # type: ignore[arg-type]

    assert [(keys[0], args[4:]) for keys, args in calls] == [
        (redis_commit.state_keys("{b}")[0], ["opaque", "1", "x", "4"]),
        (redis_commit.state_keys("{a}")[0], ["transactional", "2", "x", "1", "y", "2"]),
        (redis_commit.state_keys("{a}")[0], ["transactional", "1", "z", "3"]),
        (redis_commit.state_keys("{a}")[0], ["transactional", "1", "q", "7"]),
    ]
    assert all(args[:4] == ["7", "1", "0", "0"] for _, args in calls)
    assert result == redis_commit.ApplyResult(len(calls), 0, False, len(calls))
    assert items.walks == 1  # grouped in one pass, not filtered once per state (len(partials) x len(items))
