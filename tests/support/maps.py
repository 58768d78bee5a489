"""What the map-state tests do with a state: apply one txid's counts inside its begin_commit/commit, and read what
a backing map stores underneath a CachedMap (its cache would answer what the store dropped)."""

from __future__ import annotations

from txdag.state import CachedMap, combine_sum


def add_all(state, txid: int, counts: dict[str, int]) -> list:
    """``counts`` added to ``state`` as txid ``txid``, one key per word; the new values."""
    state.begin_commit(txid)
    keys = [(word,) for word in counts]
    result = state.multi_update(keys, [combine_sum(n) for n in counts.values()])
    state.commit(txid)
    return result


def stored(backing, keys: list[tuple]) -> list:
    """The stored objects of ``keys``, read from the store itself (under a CachedMap, not from its cache)."""
    return (backing.backing if isinstance(backing, CachedMap) else backing).multi_get(keys)
