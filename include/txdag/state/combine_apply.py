"""Merge a batch's combiner partials into a map state with the aggregator's ``combine``, in chunks.

Trident's persistentAggregate with a CombinerAggregator: per key, ``combine(stored, partial)`` (the partial alone
when nothing is stored), written with the state's txid rules by the map state itself (TransactionalMap skips a
key that already holds the txid, OpaqueMap recomputes from the previous value), so a commit re-run after a crash
between two chunks changes nothing already applied. Each chunk is one read (a pipeline) and one write (a script).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from txdag.state.base import Key, ValueUpdater
from txdag.state.map_state import MapStateBase

DEFAULT_CHUNK = 5000


def apply_combined(state: MapStateBase, txid: int, partials: Mapping[str, Any],
                   combine: Callable[[Any, Any], Any], chunk_size: int = DEFAULT_CHUNK) -> list[tuple[Key, Any]]:
    """Merge ``partials`` (hash field -> partial) for batch ``txid``; returns each key with its new value."""
    return apply_updaters(state, txid, [(f, _merge(combine, p)) for f, p in partials.items()], chunk_size)


def apply_updaters(state: MapStateBase, txid: int, updates: list[tuple[str, ValueUpdater]],
                   chunk_size: int = DEFAULT_CHUNK) -> list[tuple[Key, Any]]:
    """``multi_update`` of (hash field, updater) pairs for batch ``txid``, a chunk at a time; the new values."""
    codec = state.key_codec
    new: list[tuple[Key, Any]] = []
    state.begin_commit(txid)
    for first in range(0, len(updates), chunk_size):
        keys = [codec.decode(f) for f, _ in updates[first : first + chunk_size]]
        new += zip(keys, state.multi_update(keys, [u for _, u in updates[first : first + chunk_size]]))
    state.commit(txid)
    return new


def _merge(combine: Callable[[Any, Any], Any], partial: Any) -> ValueUpdater:
    return lambda stored: partial if stored is None else combine(stored, partial)
