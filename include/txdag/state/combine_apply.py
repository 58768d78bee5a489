"""Merge a batch's combiner partials into a map state with the aggregator's ``combine``, in chunks.

Trident's persistentAggregate with a CombinerAggregator: per key, ``combine(stored, partial)`` (the partial alone
when nothing is stored), written with the state's txid rules by the map state itself (TransactionalMap skips a
key that already holds the txid, OpaqueMap recomputes from the previous value), so a commit re-run after a crash
between two chunks changes nothing already applied. Each chunk is one read (a pipeline) and one write (a script).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from txdag.state.base import ValueUpdater
from txdag.state.map_state import MapStateBase

DEFAULT_CHUNK = 5000


def apply_combined(state: MapStateBase, txid: int, partials: Mapping[str, Any],
                   combine: Callable[[Any, Any], Any], chunk_size: int = DEFAULT_CHUNK) -> int:
    """Merge ``partials`` (hash field -> partial) for batch ``txid``; returns how many keys were given."""
    codec = state.backing.key_codec  # type: ignore[attr-defined]
    items = list(partials.items())
    state.begin_commit(txid)
    for first in range(0, len(items), chunk_size):
        chunk = items[first : first + chunk_size]
        state.multi_update([codec.decode(f) for f, _ in chunk], [_merge(combine, p) for _, p in chunk])
    state.commit(txid)
    return len(items)


def _merge(combine: Callable[[Any, Any], Any], partial: Any) -> ValueUpdater:
    return lambda stored: partial if stored is None else combine(stored, partial)
